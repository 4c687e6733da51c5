"""Issue 19 item 7: ``spark.read`` -> ``df.write`` -> ``spark.read`` gives equal tables, cell for cell: the extreme
values of each type, empty strings and binaries, non-ASCII text, 2 MB cells, and many versions when asked for."""

from __future__ import annotations

import math
import struct
import time
from typing import Any

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    TableOptions,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.table.client import TableClient

MAX_LONG, MIN_LONG = 2**63 - 1, -(2**63)
CELL_2MB = 2 * 1024 * 1024
KEY = (PrimaryKeyColumn("k", PrimaryKeyType.STRING), PrimaryKeyColumn("n", PrimaryKeyType.INTEGER))
DEFINED = (DefinedColumn("i", ColumnType.INTEGER), DefinedColumn("d", ColumnType.DOUBLE),
           DefinedColumn("b", ColumnType.BOOLEAN), DefinedColumn("s", ColumnType.STRING),
           DefinedColumn("x", ColumnType.BINARY))
DOUBLES = [0.0, -0.0, 1.5, -1.5, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
           -5e-324, 0.1]
"""Every finite extreme (Tablestore refuses NaN and infinities: "NaN can't be set to double value")."""


def _rows_of_every_kind() -> list[tuple[tuple[tuple[str, Any], ...], dict[str, Any]]]:
    rows: list[tuple[tuple[tuple[str, Any], ...], dict[str, Any]]] = []
    for value in [MIN_LONG, MAX_LONG, 0, -1, 1]:
        rows.append(((("k", "int"), ("n", value)), {"i": value}))
    for n, value in enumerate(DOUBLES):
        rows.append(((("k", "double"), ("n", n)), {"d": value}))
    rows += [((("k", "bool"), ("n", 0)), {"b": True}), ((("k", "bool"), ("n", 1)), {"b": False})]
    texts = ["", "ascii", "非ASCII – ünïcödé 🚀", "\x00nul inside", "x" * 1000]
    for n, text in enumerate(texts):
        rows.append(((("k", "string"), ("n", n)), {"s": text}))
    for n, data in enumerate([b"", b"\x00", bytes(range(256))]):
        rows.append(((("k", "binary"), ("n", n)), {"x": data}))
    rows.append(((("k", "2mb"), ("n", 0)), {"s": "é" * (CELL_2MB // 2)}))  # 2 MB of UTF-8
    rows.append(((("k", "2mb"), ("n", 1)), {"x": bytes(i % 251 for i in range(CELL_2MB))}))
    rows.append(((("k", ""), ("n", MIN_LONG)), {}))  # an empty string key; a row of the key alone
    rows.append(((("k", "全部"), ("n", MAX_LONG)), {"i": 7, "d": -0.5, "b": True, "s": "", "x": b""}))
    return rows


def _make(client: TableClient, name: str, max_versions: int = 1) -> str:
    client.create_table(TableSchema(name, KEY, DEFINED, options=TableOptions(max_versions=max_versions)))
    return name


def _cells(client: TableClient, table: str, max_versions: int = 1) -> list[tuple[Any, ...]]:
    """Every cell of the table as (key, column, value bits, version if versioned), NaN-safe and -0.0-exact."""
    out = []
    for row in client.iter_range(table, [(c.name, INF_MIN) for c in KEY], [(c.name, INF_MAX) for c in KEY],
                                 max_versions=max_versions):
        out.append((row.primary_key, None, None, None))
        for column in row.columns:
            value = column.value
            shown = ("double", struct.pack(">d", value)) if isinstance(value, float) else (type(value).__name__,
                                                                                              value)
            out.append((row.primary_key, column.name, shown, column.timestamp if max_versions > 1 else None))
    return out


def _read(spark: Any, connection: dict[str, str], table: str, **options: str) -> Any:
    return spark.read.format("tablestore").options(**connection, table=table, **options).load()


def _write(frame: Any, connection: dict[str, str], table: str) -> None:
    frame.write.format("tablestore").options(**connection, table=table).mode("append").save()


def test_read_write_read_gives_equal_tables(spark: Any, connection: dict[str, str], client: TableClient) -> None:
    source, copy = _make(client, "rt_source"), _make(client, "rt_copy")
    client.write_rows([RowWrite(source, WriteType.PUT, key, tuple((name, v) for name, v in cols.items()))  # type: ignore[misc]
                       for key, cols in _rows_of_every_kind()])
    frame = _read(spark, connection, source)
    assert [f.dataType.simpleString() for f in frame.schema.fields] == ["string", "bigint", "bigint", "double",
                                                                        "boolean", "string", "binary"]
    _write(frame, connection, copy)
    assert _cells(client, copy) == _cells(client, source)
    again = _read(spark, connection, copy).collect()
    first = _read(spark, connection, source).collect()
    assert len(again) == len(first) == len(_rows_of_every_kind())
    assert sorted(map(repr, again)) == sorted(map(repr, first))  # repr: -0.0 compares exactly
    doubles = [r["d"] for r in sorted(again, key=lambda r: (r["k"], r["n"])) if r["k"] == "double"]
    assert doubles == DOUBLES and math.copysign(1, doubles[1]) == -1


def test_many_versions_round_trip_as_arrays_of_timestamped_values(spark: Any, connection: dict[str, str],
                                                                  client: TableClient) -> None:
    source, copy = _make(client, "rt_versions", max_versions=10), _make(client, "rt_versions_copy", max_versions=10)
    now = int(time.time() * 1000)
    writes = []
    for n in range(20):
        key = (("k", f"row{n:02d}"), ("n", n))
        cells = [("s", f"v{n}.{j}", now - 1000 * j) for j in range(n % 10 + 1)]
        cells += [("i", j * MAX_LONG // 10, now - 7 * j) for j in range(3)]
        writes.append(RowWrite(source, WriteType.PUT, key, tuple(cells)))  # type: ignore[arg-type]
    client.write_rows(writes)
    frame = _read(spark, connection, source, max_versions="10")
    assert frame.schema["s"].dataType.simpleString() == "array<struct<timestamp:bigint,value:string>>"
    _write(frame, connection, copy)
    assert _cells(client, copy, max_versions=10) == _cells(client, source, max_versions=10)
    assert sorted(map(repr, _read(spark, connection, copy, max_versions="10").collect())) == \
        sorted(map(repr, frame.collect()))
