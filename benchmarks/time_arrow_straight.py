"""Time PlainBuffer bytes -> Arrow straight from the bytes, through whichever API the revision on ``PYTHONPATH`` has,
so one script measures a revision before the one codec (``EncodedRecords``, ``batch_encoded``) and after it
(``Records``, ``RowsToArrow.page_compiled``). Best of ``--repeat`` CPU times (``time.process_time``) each:
a ReadRecords answer split in C and its change log, a GetRange page as a flat batch, the same page with every
attribute column versioned (3 versions). ``compare_codec_revisions.sh`` runs it for two revisions.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.model import Column, ColumnType, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
from airflow_tablestore.protocol import ots_tunnel_pb2
from airflow_tablestore.spark.arrow import changes
from airflow_tablestore.spark.arrow.values import CELL, KEY, VERSIONS, OutputField, RowsToArrow
from benchmarks.bench_plainbuffer import BASE_TS, make_rows

try:  # after the one codec
    from airflow_tablestore.client.plainbuffer.rows import Rows
    from airflow_tablestore.client.records import split_read_records

    def page(converter: RowsToArrow, data: bytes) -> Any:
        return converter.page_compiled(Rows(data))

    def change_log(answer: bytes) -> Any:
        return changes.records_to_arrow_compiled(split_read_records(answer)[0], "ch", "chunk")  # type: ignore[index]
except ImportError:  # before: the _encoded twins
    from airflow_tablestore.client.records import split_read_records

    def page(converter: RowsToArrow, data: bytes) -> Any:
        return converter.batch_encoded(data)  # type: ignore[attr-defined]

    def change_log(answer: bytes) -> Any:
        return changes.encoded_records_to_arrow_compiled(  # type: ignore[attr-defined]
            split_read_records(answer)[0], "ch", "chunk")  # type: ignore[index]


def best(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        out = work()
        times.append(time.process_time() - t0)
        assert out is not None, "the straight path was not taken"
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    rows = make_rows(args.rows)
    answer_message: Any = ots_tunnel_pb2.ReadRecordsResponse(next_token="t")  # type: ignore[attr-defined]
    for i, r in enumerate(rows):
        answer_message.records.add(action_type=1, record=encode_row(
            Row(r.primary_key, r.columns, False, SequenceInfo(0, (BASE_TS + i) * 1000, i))))
    answer = answer_message.SerializeToString()
    kinds = {"amount": ColumnType.INTEGER, "city": ColumnType.STRING, "comment": ColumnType.STRING,
             "count": ColumnType.INTEGER, "deleted": ColumnType.BOOLEAN, "digest": ColumnType.BINARY,
             "price": ColumnType.DOUBLE, "ratio": ColumnType.DOUBLE, "status": ColumnType.STRING,
             "updated_ms": ColumnType.INTEGER}
    arrow_of = {ColumnType.INTEGER: pa.int64(), ColumnType.DOUBLE: pa.float64(), ColumnType.BOOLEAN: pa.bool_(),
                ColumnType.STRING: pa.string(), ColumnType.BINARY: pa.binary()}
    keys = [OutputField("id", KEY, ColumnType.INTEGER, 0), OutputField("tenant", KEY, ColumnType.STRING, 1)]
    flat = RowsToArrow([*keys, *(OutputField(n, CELL, k) for n, k in kinds.items())],
                       pa.schema([pa.field("id", pa.int64()), pa.field("tenant", pa.string()),
                                  *(pa.field(n, arrow_of[k]) for n, k in kinds.items())]), failfast=True)
    versioned = RowsToArrow(
        [*keys, *(OutputField(n, VERSIONS, k) for n, k in kinds.items())],
        pa.schema([pa.field("id", pa.int64()), pa.field("tenant", pa.string()),
                   *(pa.field(n, pa.list_(pa.field("element", pa.struct([
                       pa.field("timestamp", pa.int64(), False), pa.field("value", arrow_of[k])]), False)))
                     for n, k in kinds.items())]), failfast=True)
    getrange = encode_rows(rows)
    versioned_page = encode_rows([Row(r.primary_key, tuple(Column(c.name, c.value, (c.timestamp or 0) - k)
                                                            for c in r.columns for k in range(3))) for r in rows])
    for name, work in (("answer -> change log (split + build)", lambda: change_log(answer)),
                       ("GetRange page -> flat batch", lambda: page(flat, getrange)),
                       ("GetRange page, 3 versions -> batch", lambda: page(versioned, versioned_page))):
        seconds = best(args.repeat, work)
        print(f"arrow straight {name:<40} {args.rows / seconds:>12,.0f} rows/s")


if __name__ == "__main__":
    main()
