"""TableClient throughput against a local emulator: batched helpers vs one-request-per-row (same run).

Run: ``.venv/bin/python -m benchmarks.bench_table_client [--rows 3000]``

One emulator process, one table ``(pk STRING, id INTEGER)``, rows with one 100-byte string column. Timed,
single client thread, sequential:

* writes — baseline ``put_row`` per row, vs ``write_rows`` (batches of 200);
* point reads — baseline ``get_row`` per row, vs ``get_rows`` (BatchGetRow, 100 keys per request);
* scan — ``iter_range`` over the whole table (pages as the emulator returns them), vs the get_row baseline;
* signing — ``build_headers`` (V2 and V4) per second, CPU only.

Every phase is checked to see exactly ``rows`` rows before numbers are printed.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from airflow_tablestore.client import (
    INF_MAX,
    INF_MIN,
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    TableClient,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.auth import Credentials, build_headers
from airflow_tablestore.emulator.testing import EmulatorProcess

PAYLOAD = "x" * 100


def _timed(label: str, fn, rows: int) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    seen = fn()
    elapsed = time.perf_counter() - started
    if seen != rows:
        raise SystemExit(f"{label}: expected {rows} rows, saw {seen}")
    print(f"{label:<38} {elapsed:8.3f} s  {rows / elapsed:10.0f} rows/s")
    return elapsed


def _keys(prefix: str, rows: int) -> list[list[tuple[str, object]]]:
    return [[("pk", prefix), ("id", i)] for i in range(rows)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3000)
    args = ap.parse_args()
    rows = args.rows
    schema_pk = (PrimaryKeyColumn("pk", PrimaryKeyType.STRING), PrimaryKeyColumn("id", PrimaryKeyType.INTEGER))

    with EmulatorProcess(extra_args=["--log-level", "WARNING"]) as emu, TableClient(**emu.client_kwargs) as client:
        client.create_table(TableSchema("bench", schema_pk))

        def put_each() -> int:
            for key in _keys("a", rows):
                client.put_row("bench", key, {"v": PAYLOAD})
            return rows

        def write_batched() -> int:
            return client.write_rows(
                RowWrite("bench", WriteType.PUT, (("pk", "b"), ("id", i)), (Column("v", PAYLOAD),)) for i in range(rows)
            )

        def get_each() -> int:
            return sum(1 for key in _keys("a", rows) if client.get_row("bench", key) is not None)

        def get_batched() -> int:
            return sum(1 for row in client.get_rows("bench", _keys("b", rows)) if row is not None)

        def scan() -> int:
            return sum(1 for _ in client.iter_range("bench", [("pk", "b"), ("id", INF_MIN)],
                                                    [("pk", "b"), ("id", INF_MAX)]))

        print(f"TableClient vs emulator, {rows} rows of 100 bytes, one client thread")
        put_s = _timed("baseline: put_row per row", put_each, rows)
        batch_s = _timed("write_rows (200 rows/request)", write_batched, rows)
        get_s = _timed("baseline: get_row per row", get_each, rows)
        bget_s = _timed("get_rows (BatchGetRow, 100 keys)", get_batched, rows)
        scan_s = _timed("iter_range (GetRange pages)", scan, rows)
        print(f"write_rows speed-up vs put_row:   {put_s / batch_s:6.1f}x")
        print(f"get_rows speed-up vs get_row:     {get_s / bget_s:6.1f}x")
        print(f"iter_range speed-up vs get_row:   {get_s / scan_s:6.1f}x")

    now = datetime(2026, 1, 1, tzinfo=UTC)
    n = 20000
    for label, creds in (("V2", Credentials("id", "secret")), ("V4", Credentials("id", "secret", region="cn-hangzhou"))):
        started = time.perf_counter()
        for _ in range(n):
            build_headers(creds, "inst", "/PutRow", b"x" * 200, now=now)
        elapsed = time.perf_counter() - started
        print(f"signing {label}: {n / elapsed:10.0f} requests/s ({elapsed / n * 1e6:.1f} us each)")


if __name__ == "__main__":
    main()
