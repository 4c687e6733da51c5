"""Time the client's hot paths through their public API only, so one script measures any revision.

Run with the package of the revision under test on ``PYTHONPATH`` (``compare_client_revisions.sh`` does):
PlainBuffer ``encode_row``, ``decode_rows`` (a GetRange answer) and ``decode_record_list`` (tunnel records),
best of ``--repeat`` runs each, in rows per second.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from airflow_tablestore.client.model import Column, Row, SequenceInfo

try:  # the codec's modules since the client was split into subpackages
    from airflow_tablestore.client.plainbuffer.decode import decode_record_list, decode_rows
    from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
except ImportError:  # older revisions: the flat ``client/plainbuffer.py`` module
    from airflow_tablestore.client.plainbuffer import (  # type: ignore[attr-defined,no-redef]
        decode_record_list,
        decode_rows,
        encode_row,
        encode_rows,
    )

BASE_TS_MS = 1_700_000_000_000


def make_rows(count: int) -> list[Row]:
    """Rows like a typical replicated table: two key columns and six attribute columns of every type."""
    rows = []
    for i in range(count):
        columns = (
            Column("name", f"user-{i:08d}", BASE_TS_MS + i),
            Column("score", i * 0.5, BASE_TS_MS + i),
            Column("count", i * 7, BASE_TS_MS + i),
            Column("active", i % 2 == 0, BASE_TS_MS + i),
            Column("payload", bytes(range(i % 64)) * 2, BASE_TS_MS + i),
            Column("note", "x" * (i % 40), BASE_TS_MS + i),
        )
        rows.append(Row((("region", f"r{i % 16}"), ("id", i)), columns))
    return rows


def best_of(repeat: int, work: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = make_rows(args.rows)
    getrange = encode_rows(rows)
    records = [encode_row(Row(r.primary_key, r.columns, False, SequenceInfo(0, (BASE_TS_MS + i) * 1000, 0)))
               for i, r in enumerate(rows)]
    assert decode_rows(getrange) == rows
    timings = {
        "plainbuffer encode_row": best_of(args.repeat, lambda: [encode_row(r) for r in rows]),
        "plainbuffer decode_rows (GetRange)": best_of(args.repeat, lambda: decode_rows(getrange)),
        "plainbuffer decode_record_list (tunnel)": best_of(args.repeat, lambda: decode_record_list(records)),
    }
    for name, seconds in timings.items():
        print(f"{name:44} {args.rows / seconds:12,.0f} rows/s")


if __name__ == "__main__":
    main()
