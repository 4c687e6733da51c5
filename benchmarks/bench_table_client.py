"""TableClient throughput against a local emulator: batched helpers vs one-request-per-row (same run).

Run: ``.venv/bin/python -m benchmarks.bench_table_client [--rows 2000] [--rounds 3]``

One emulator process, one table ``(pk STRING, id INTEGER)``, rows with one 100-byte string column. Timed,
single client thread, sequential:

* writes — baseline ``put_row`` per row, vs ``write_rows`` (batches of 200);
* point reads — baseline ``get_row`` per row, vs ``get_rows`` (BatchGetRow, 100 keys per request);
* scan — ``iter_range`` over the whole table (pages as the emulator returns them), vs the get_row baseline;
* the official SDK 6.4.8 (from ``.oracle-venv`` when present): put_row, get_row and xget_range per row on
  the same emulator, as an external baseline;
* signing — ``build_headers`` (V2 and V4) per second, CPU only.

Phases alternate over ``--rounds`` rounds and the best time of each is kept (the machine is shared).

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
from benchmarks.common import timed_count

PAYLOAD = "x" * 100


_SDK_SCRIPT = r"""
import json, logging, sys, time
logging.disable(logging.CRITICAL)
from tablestore import INF_MAX, INF_MIN, CapacityUnit, Condition, Direction, OTSClient, Row, RowExistenceExpectation
endpoint, instance, ak, secret, rows = sys.argv[1:6]
rows = int(rows)
c = OTSClient(endpoint, ak, secret, instance)
out = {}
t = time.perf_counter()
for i in range(rows):
    c.put_row("bench", Row([("pk", "s"), ("id", i)], [("v", "x" * 100)]), Condition(RowExistenceExpectation.IGNORE))
out["put"] = time.perf_counter() - t
t = time.perf_counter()
n = sum(1 for i in range(rows) if c.get_row("bench", [("pk", "s"), ("id", i)], max_version=1)[1] is not None)
out["get"] = time.perf_counter() - t
assert n == rows, n
t = time.perf_counter()
n = sum(1 for _ in c.xget_range("bench", Direction.FORWARD, [("pk", "s"), ("id", INF_MIN)],
                                [("pk", "s"), ("id", INF_MAX)], CapacityUnit(0, 0), max_version=1))
out["scan"] = time.perf_counter() - t
assert n == rows, n
print(json.dumps(out))
"""


def _sdk_baseline(emu: EmulatorProcess, rows: int) -> dict[str, float] | None:
    """Time the official SDK (``.oracle-venv``) on the same emulator, or None when it is not installed."""
    import json
    import subprocess
    import tempfile
    from pathlib import Path

    python = Path(__file__).resolve().parent.parent / ".oracle-venv" / "bin" / "python"
    if not python.exists():
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(_SDK_SCRIPT)
    try:
        run = subprocess.run(
            [str(python), handle.name, emu.endpoint, emu.instance, emu.access_key_id, emu.access_key_secret,
             str(rows)], capture_output=True, text=True, timeout=1800,
        )
    finally:
        Path(handle.name).unlink()
    if run.returncode != 0:
        raise SystemExit(f"official SDK run failed:\n{run.stderr[-2000:]}")
    result: dict[str, float] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def _keys(prefix: str, rows: int) -> list[list[tuple[str, object]]]:
    return [[("pk", prefix), ("id", i)] for i in range(rows)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="each phase runs this many times; the best is kept")
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

        phases = {
            "baseline: put_row per row": put_each,
            "write_rows (200 rows/request)": write_batched,
            "baseline: get_row per row": get_each,
            "get_rows (BatchGetRow, 100 keys)": get_batched,
            "iter_range (GetRange pages)": scan,
        }
        best: dict[str, float] = {}
        sdk_best: dict[str, float] = {}
        for _ in range(args.rounds):
            for label, fn in phases.items():
                best[label] = min(best.get(label, float("inf")), timed_count(label, fn, rows))
            sdk = _sdk_baseline(emu, rows)
            for name, seconds in (sdk or {}).items():
                sdk_best[name] = min(sdk_best.get(name, float("inf")), seconds)

        print(f"TableClient vs emulator, {rows} rows of 100 bytes, one client thread, best of {args.rounds} rounds")
        for label, seconds in best.items():
            print(f"{label:<38} {seconds:8.3f} s  {rows / seconds:10.0f} rows/s")
        put_s, batch_s = best["baseline: put_row per row"], best["write_rows (200 rows/request)"]
        get_s, bget_s = best["baseline: get_row per row"], best["get_rows (BatchGetRow, 100 keys)"]
        scan_s = best["iter_range (GetRange pages)"]
        print(f"write_rows speed-up vs put_row:   {put_s / batch_s:6.1f}x")
        print(f"get_rows speed-up vs get_row:     {get_s / bget_s:6.1f}x")
        print(f"iter_range speed-up vs get_row:   {get_s / scan_s:6.1f}x")
        if sdk_best:
            print(f"official SDK 6.4.8 (same emulator): put_row {rows / sdk_best['put']:.0f} rows/s, "
                  f"get_row {rows / sdk_best['get']:.0f} rows/s, xget_range {rows / sdk_best['scan']:.0f} rows/s")
            print(f"ours / SDK throughput: put_row {sdk_best['put'] / put_s:.2f}x, "
                  f"get_row {sdk_best['get'] / get_s:.2f}x, "
                  f"range scan {sdk_best['scan'] / scan_s:.2f}x")

    now = datetime(2026, 1, 1, tzinfo=UTC)
    n = 20000
    for label, creds in (("V2", Credentials("id", "secret")),
                         ("V4", Credentials("id", "secret", region="cn-hangzhou"))):
        started = time.perf_counter()
        for _ in range(n):
            build_headers(creds, "inst", "/PutRow", b"x" * 200, now=now)
        elapsed = time.perf_counter() - started
        print(f"signing {label}: {n / elapsed:10.0f} requests/s ({elapsed / n * 1e6:.1f} us each)")


if __name__ == "__main__":
    main()
