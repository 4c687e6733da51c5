"""``spark.read.format("tablestore")`` on a real local Spark against the emulator: no registration, the default
schema and exact types, reader modes, columns/versions/time range, replicas, pushdown equal to pushdown off for
every operator (and the rows the server returns dropping), partitions from split points."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    MAX_TIME_DEVIATION,
    ActionType,
    Column,
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    RowWrite,
    SequenceInfo,
    TableOptions,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.plainbuffer.decode import decode_rows
from airflow_tablestore.client.replica import (
    FENCE_COLUMN,
    TOMBSTONE_SUFFIX,
    fence_condition,
    fence_value,
    fenced_row_write,
    fenced_write,
    write_fenced,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.datasource.reader import TablestorePushdownReader, TablestoreReader
from testing.jvm import FAST_JVM

ROOT = str(Path(__file__).resolve().parents[3])
FORMAT = "tablestore"
TYPED = "ds_read_typed"
BIG = "ds_read_big"
REPLICA = "ds_read_replica"
VERSIONED = "ds_read_versions"


@pytest.fixture(scope="module")
def spark(tablestore_emulator: EmulatorProcess) -> Iterator[Any]:
    """A local Spark that finds the format with no registration line (``pyspark_tablestore`` on PYTHONPATH)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("test-tablestore-read")
               .config("spark.ui.enabled", "false").config("spark.driver.extraJavaOptions", FAST_JVM)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield session
    session.stop()


TYPED_ROWS: list[tuple[tuple[int, str], dict[str, Any]]] = [
    ((1, "a"), {"i": -(2**63), "d": -0.0, "f": False, "s": "", "x": b""}),
    ((2, "é"), {"i": 2**63 - 1, "d": 1.7976931348623157e308, "f": True, "s": "中文🙂", "x": b"\x00\xff"}),
    ((3, "b"), {"i": 0, "d": -1.5, "s": "m" * 3000, "x": bytes(range(256))}),
    ((4, ""), {"i": "wrong", "d": 7, "f": 1, "s": b"bytes", "x": "text"}),  # every cell of another type
    ((5, "z"), {}),  # only the key
    ((6, "q"), {"other": "not in the schema"}),
    ((7, "a"), {"i": 5, "d": 2.5, "f": True, "s": "b", "x": b"\x01"}),
    ((7, "b"), {"i": 6, "d": -1e300, "f": False, "s": "c", "x": b"\x02"}),
    ((8, "c"), {"i": 5, "s": "b"}),
    ((9, "d"), {"d": 5e-324, "f": True, "x": b"\x01\x00"}),
]


@pytest.fixture(scope="module")
def typed(client: TableClient) -> str:
    client.create_table(TableSchema(TYPED, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),
                                            PrimaryKeyColumn("k", PrimaryKeyType.STRING)),
                                    defined_columns=(DefinedColumn("i", ColumnType.INTEGER),
                                                     DefinedColumn("d", ColumnType.DOUBLE),
                                                     DefinedColumn("f", ColumnType.BOOLEAN),
                                                     DefinedColumn("s", ColumnType.STRING),
                                                     DefinedColumn("x", ColumnType.BINARY))))
    for (id_, k), cells in TYPED_ROWS:
        client.put_row(TYPED, [("id", id_), ("k", k)], list(cells.items()))
    return TYPED


def _read(spark: Any, connection: dict[str, str], table: str, **options: Any) -> Any:
    reader = spark.read.format(FORMAT).options(**connection).option("table", table)
    schema = options.pop("schema", None)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.options(**{k: str(v) for k, v in options.items()}).load()


def _fit(value: Any, kind: type) -> Any:
    return value if type(value) is kind or (kind is bytes and type(value) is bytes) else None


def _expected_typed() -> list[tuple[Any, ...]]:
    out = []
    for (id_, k), cells in TYPED_ROWS:
        out.append((id_, k, _fit(cells.get("i"), int), _fit(cells.get("d"), float), _fit(cells.get("f"), bool),
                    _fit(cells.get("s"), str), _fit(cells.get("x"), bytes)))
    return out


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in df.collect()),
                  key=repr)


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    def norm(v: Any) -> Any:
        return ("nan",) if isinstance(v, float) and math.isnan(v) else (v, math.copysign(1, v)) \
            if isinstance(v, float) else v
    return [tuple(map(norm, r)) for r in a] == [tuple(map(norm, r)) for r in b]


def test_default_schema_and_exact_types_without_a_registration_line(spark: Any, connection: dict[str, str],
                                                                     typed: str) -> None:
    df = _read(spark, connection, typed)
    assert df.schema.simpleString() == ("struct<id:bigint,k:string,i:bigint,d:double,f:boolean,s:string,"
                                        "x:binary>")
    assert [f.nullable for f in df.schema.fields] == [False, False, True, True, True, True, True]
    assert _same(_rows(df), sorted(_expected_typed(), key=repr))


def test_permissive_corrupt_record_column_and_failfast(spark: Any, connection: dict[str, str], typed: str) -> None:
    schema = "id long, k string, i long, s string, _corrupt_record string"
    rows = {r["id"]: r for r in _read(spark, connection, typed, schema=schema).collect()}
    assert rows[4]["i"] is None and rows[4]["s"] is None and rows[1]["_corrupt_record"] is None
    assert '"cell_type": "STRING"' in rows[4]["_corrupt_record"] and '"i"' in rows[4]["_corrupt_record"]
    with pytest.raises(Exception) as err:
        _read(spark, connection, typed, schema=schema, mode="FAILFAST").collect()
    text = str(err.value)
    assert "CellTypeError" in text and "id=4" in text and "column 'i'" in text and "STRING" in text
    assert connection["access_key_secret"] not in text


def test_a_schema_type_with_no_exact_tablestore_type_is_refused(spark: Any, connection: dict[str, str],
                                                                typed: str) -> None:
    with pytest.raises(Exception, match="no Tablestore type matches exactly"):
        _read(spark, connection, typed, schema="id long, k string, i int").collect()


def test_columns_option(spark: Any, connection: dict[str, str], typed: str) -> None:
    df = _read(spark, connection, typed, columns="s,i")
    assert df.columns == ["id", "k", "s", "i"]
    assert len(df.collect()) == len(TYPED_ROWS)  # rows without those columns are read too


def test_versions_and_time_range(spark: Any, connection: dict[str, str], client: TableClient) -> None:
    client.create_table(TableSchema(VERSIONED, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    defined_columns=(DefinedColumn("v", ColumnType.STRING),),
                                    options=TableOptions(max_versions=5, max_time_deviation=MAX_TIME_DEVIATION)))
    client.put_row(VERSIONED, [("id", 1)], [("v", "one", 1000)])
    client.update_row(VERSIONED, [("id", 1)], [Column("v", "two", 2000)])
    client.update_row(VERSIONED, [("id", 1)], [Column("v", "three", 3000)])
    client.put_row(VERSIONED, [("id", 2)], [("v", "early", 500), ("v", "late", 4000)])
    client.put_row(VERSIONED, [("id", 3)], [("v", "only", 5000)])
    df = _read(spark, connection, VERSIONED, max_versions=5)
    assert df.schema["v"].dataType.simpleString() == "array<struct<timestamp:bigint,value:string>>"
    assert {r["id"]: [(v["timestamp"], v["value"]) for v in r["v"]] for r in df.collect()} == {
        1: [(3000, "three"), (2000, "two"), (1000, "one")], 2: [(4000, "late"), (500, "early")], 3: [(5000, "only")]}
    # only rows with a version in the range: rows 2 and 3 have none in [1500, 3000)
    ranged = _read(spark, connection, VERSIONED, max_versions=5, time_range_start=1500, time_range_end=3000)
    assert {r["id"]: [v["value"] for v in r["v"]] for r in ranged.collect()} == {1: ["two"]}
    newest = _read(spark, connection, VERSIONED, time_range_end=2500)
    assert {r["id"]: r["v"] for r in newest.collect()} == {1: "two", 2: "early"}
    assert sorted(r["id"] for r in _read(spark, connection, VERSIONED, schema="id long",
                                         time_range_start=4500).collect()) == [3]


def test_a_versioned_schema_without_max_versions_reads_every_version_the_table_keeps(
        spark: Any, connection: dict[str, str], client: TableClient) -> None:
    table = "ds_read_versions_schema"
    client.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    options=TableOptions(max_versions=3, max_time_deviation=MAX_TIME_DEVIATION)))
    client.put_row(table, [("id", 1)], [("v", f"v{t}", t) for t in (1000, 2000, 3000, 4000)])
    schema = "id long, v array<struct<timestamp: long, value: string>>"
    every = _read(spark, connection, table, schema=schema).collect()
    assert [(v["timestamp"], v["value"]) for v in every[0]["v"]] == [(4000, "v4000"), (3000, "v3000"),
                                                                      (2000, "v2000")]  # the table keeps 3
    one = _read(spark, connection, table, schema=schema, max_versions=1).collect()
    assert [(v["timestamp"], v["value"]) for v in one[0]["v"]] == [(4000, "v4000")]
    assert _read(spark, connection, table).schema.simpleString() == "struct<id:bigint>"  # no defined columns


def test_a_replica_hides_its_fence_and_tombstones(spark: Any, connection: dict[str, str],
                                                  client: TableClient) -> None:
    client.create_table(TableSchema(REPLICA, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    defined_columns=(DefinedColumn("v", ColumnType.STRING),),
                                    options=TableOptions(max_time_deviation=MAX_TIME_DEVIATION)))
    seq = SequenceInfo(1, 1_700_000_000_000_000, 0)
    records = [Record(ActionType.PUT_ROW, (("id", i),), (Column("v", f"v{i}", 1000),), None) for i in range(4)]
    records.append(Record(ActionType.DELETE_ROW, (("id", 1),), (), seq))
    for record in records:
        write = fenced_write(REPLICA, record)
        assert write is not None
        write_fenced(client, [write])
    df = _read(spark, connection, REPLICA)
    assert df.columns == ["id", "v"]
    assert sorted(tuple(r) for r in df.collect()) == [(0, "v0"), (2, "v2"), (3, "v3")]
    shown = _read(spark, connection, REPLICA, show_replication_columns="true")
    assert shown.columns == ["id", "v", "_tunnel_seq"]
    rows = {r["id"]: r for r in shown.collect()}
    assert sorted(rows) == [0, 1, 2, 3] and rows[1]["v"] is None and rows[1]["_tunnel_seq"].endswith("-deleted")


def _fenced(table: str, key: int, value: str, ts: int, seq: int, kind: WriteType = WriteType.PUT) -> RowWrite:
    """A fenced write as the replication sink makes it, with the cell versions set to ``ts``."""
    fence = fence_value(SequenceInfo(1, seq, 0))
    cells = (Column("v", value, ts), Column(FENCE_COLUMN, fence, ts))
    return fenced_row_write(table, kind, (("id", key),), cells, FENCE_COLUMN, fence, carries_fence=True)


def _tombstone(table: str, key: int, ts: int, seq: int) -> RowWrite:
    """A delete as the replication sink makes it (the row becomes its marked fence alone), at version ``ts``."""
    fence = fence_value(SequenceInfo(1, seq, 0))
    return RowWrite(table, WriteType.PUT, (("id", key),), (Column(FENCE_COLUMN, fence + TOMBSTONE_SUFFIX, ts),),
                    fence_condition(FENCE_COLUMN, fence))


def test_a_time_range_read_of_a_replica_returns_the_rows_changed_in_the_range(
        spark: Any, connection: dict[str, str], client: TableClient) -> None:
    table = "ds_read_replica_range"
    client.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    defined_columns=(DefinedColumn("v", ColumnType.STRING),),
                                    options=TableOptions(max_time_deviation=MAX_TIME_DEVIATION)))
    writes = [_fenced(table, i, f"a{i}", 1000, 1 + i) for i in range(5)]  # t=1000: rows 0..4
    writes += [_tombstone(table, 1, 2000, 10),  # t=2000: row 1 deleted
               _fenced(table, 2, "b2", 3000, 20, WriteType.UPDATE),  # t=3000: row 2 updated, row 5 created
               _fenced(table, 5, "a5", 3000, 21),
               _fenced(table, 3, "b3", 4000, 30)]  # t=4000: row 3 replaced
    for write in writes:
        assert write_fenced(client, [write]) == 0

    def rows(**options: Any) -> dict[int, Any]:
        return {r["id"]: r["v"] for r in _read(spark, connection, table, **options).collect()}

    assert rows() == {0: "a0", 2: "b2", 3: "b3", 4: "a4", 5: "a5"}
    assert rows(time_range_start=2500, time_range_end=5000) == {2: "b2", 3: "b3", 5: "a5"}  # after the delete
    assert rows(time_range_start=1500, time_range_end=2500) == {}  # only the delete: its tombstone stays hidden
    assert rows(time_range_end=1500) == {0: "a0", 4: "a4"}  # before the delete and the later writes
    assert rows(time_range_start=3500) == {3: "b3"}
    assert sorted(r["id"] for r in _read(spark, connection, table, schema="id long", time_range_start=2500,
                                         time_range_end=5000).collect()) == [2, 3, 5]
    shown = _read(spark, connection, table, show_replication_columns="true", time_range_start=1500,
                  time_range_end=2500).collect()
    assert [(r["id"], r["v"], r[FENCE_COLUMN].endswith(TOMBSTONE_SUFFIX)) for r in shown] == [(1, None, True)]


PREDICATES = [
    "id = 7", "id <> 7", "id > 3", "id >= 7", "id < 3", "id <= 2", "id IN (1, 7, 9, 42)", "id IS NULL",
    "id IS NOT NULL", "id = 7 AND k > 'a'", "id = 7 AND k = 'b'", "id IN (2, 7) AND k >= 'b'", "k = 'a'",
    "k LIKE 'a%'", "id = 7 AND k LIKE 'b%'", "id BETWEEN 2 AND 7",
    "i = 5", "i <> 5", "i > 0", "i >= 5", "i < 6", "i <= 5", "i IN (5, 6)", "i NOT IN (5, 0)", "i IS NULL",
    "i IS NOT NULL", "i <=> 5", "i <=> NULL",
    "d = 2.5", "d > 0", "d >= 2.5", "d < 3.0", "d <= 2.5", "d <> 2.5", "isnan(d)", "d = double('NaN')",
    "d > double('NaN')", "d IS NULL", "d IN (2.5, -0.0)", "d = 0.0",
    "f = true", "f", "NOT f", "f <> true", "f IS NULL", "f IN (false)",
    "s = 'b'", "s <> 'b'", "s > 'b'", "s >= 'b'", "s < 'c'", "s <= ''", "s IN ('b', 'c', '')", "s NOT IN ('b')",
    "s IS NULL", "s IS NOT NULL", "s LIKE 'm%'", "s LIKE '%b'", "s = ''", "s = '中文🙂'",
    "x = X'01'", "x > X'01'", "x < X'01'", "x IS NULL", "x IN (X'', X'02')",
    "s = 'b' AND i = 5", "s = 'b' OR i = 6", "NOT (s = 'b' AND i = 5)", "id = 7 AND s <> 'b' AND d < 0",
    "i = 1 AND i = 2",
]


def test_pushdown_gives_the_rows_of_pushdown_off_for_every_operator(spark: Any, connection: dict[str, str],
                                                                     typed: str) -> None:
    mismatches = []
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        for predicate in PREDICATES:
            on = _rows(_read(spark, connection, typed).where(predicate))
            off = _rows(_read(spark, connection, typed, pushdown="false").where(predicate))
            if not _same(on, off):
                mismatches.append((predicate, on, off))
        for exact in ("id = 7", "k LIKE 'a%' AND id IN (1, 7)", "s = 'b'", "x > X'01'", "f"):
            plan = _read(spark, connection, typed).where(exact)._jdf.queryExecution().optimizedPlan().toString()
            assert "Filter" not in plan, plan  # the server applied it: Spark has nothing left to do
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert mismatches == []
    # and with the conf at its default (false) a plain read still works: no pushFilters is offered
    assert len(_read(spark, connection, typed).where("id = 7").collect()) == 2


VERSIONED_PUSHDOWN = "ds_read_versions_pushdown"
# cells as (timestamp, value); the reads below use the time range [2000, 4000): 2000 is in it, 4000 is not
VERSIONED_ROWS: list[tuple[tuple[int, str], dict[str, list[tuple[int, Any]]]]] = [
    # in the range: i=5, d=2.5, s='b', f=true; newest overall: i=6, d=-1.0, s='c', f=false
    ((1, "a"), {"i": [(1000, 1), (3000, 5), (4500, 6)], "d": [(2500, 2.5), (5000, -1.0)],
                "s": [(3000, "b"), (4500, "c")], "f": [(2000, True), (4200, False)], "h": [(2500, 10), (3500, 11)]}),
    # in the range: i=6, d=7.0, s='c', f=false; newest overall: i=5, d=7.0, s='b', f=true (at 4000, the end)
    ((2, "b"), {"i": [(2500, 6), (4500, 5)], "d": [(1000, 2.5), (3500, 7.0)], "s": [(2000, "c"), (4100, "b")],
                "f": [(3000, False), (4000, True)], "h": [(1000, 20)]}),
    # every cell in the range of another type, those of the column's type outside it
    ((3, "c"), {"i": [(3000, "wrong"), (5000, 5)], "d": [(2500, 7), (4500, 2.5)],
                "s": [(2500, b"bytes"), (4500, "b")], "f": [(3000, 1), (4500, True)], "h": [(3000, "x")]}),
    # an older version of the column's type, the newest in the range of another; d only after, f never
    ((4, "d"), {"i": [(2200, 5), (3300, "x")], "d": [(4500, 2.5)], "s": [(2100, "b")], "h": [(2100, 40)]}),
    ((5, "e"), {"i": [(5000, 5)], "s": [(1000, "b")]}),  # nothing in the range
    ((6, "f"), {"other": [(3000, "not in the schema")], "i": [(4500, 5)]}),  # in the range: a column not read
    ((7, "a"), {"i": [(3000, 5)], "d": [(3000, -1e300)], "s": [(3000, "b")], "f": [(3000, True)]}),
    ((7, "b"), {"i": [(2000, 6), (4000, 5)], "d": [(2000, 2.5), (3900, 3.5)], "s": [(1999, "b"), (2000, "")],
                "f": [(1999, True), (2000, False)], "h": [(2000, 70), (2500, 71), (3000, 72), (3500, 73)]}),
    ((8, "c"), {"s": [(2500, "b"), (3500, "c")]}),  # only s, in the range
    ((9, "z"), {"i": [(1000, 5)], "d": [(3000, 2.5)]}),
]

VERSIONED_PREDICATES = [
    "id = 7", "id <> 7", "id < 3", "id >= 7", "id IN (1, 3, 7, 42)", "id IS NULL", "id IS NOT NULL",
    "id = 7 AND k >= 'b'",
]
SCALAR_PREDICATES = VERSIONED_PREDICATES + [
    "i = 5", "i <> 5", "i < 6", "i >= 5", "i IN (5, 6)", "i IS NULL", "i IS NOT NULL",
    "d = 2.5", "d <> 2.5", "d < 3.0", "d >= 2.5", "d IN (2.5, 7.0)", "d IS NULL", "d IS NOT NULL",
    "s = 'b'", "s <> 'b'", "s < 'c'", "s >= 'b'", "s IN ('b', '')", "s IS NULL", "s IS NOT NULL",
    "f = true", "f <> true", "f IN (false)", "f IS NULL", "f IS NOT NULL",
    "s = 'b' AND i = 5", "id IN (1, 2, 3, 7) AND f = false AND d IS NOT NULL",
]


def test_pushdown_gives_the_rows_of_pushdown_off_with_a_time_range_and_versions(
        spark: Any, connection: dict[str, str], client: TableClient) -> None:
    table = VERSIONED_PUSHDOWN
    client.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),
                                            PrimaryKeyColumn("k", PrimaryKeyType.STRING)),
                                    defined_columns=(DefinedColumn("i", ColumnType.INTEGER),
                                                     DefinedColumn("d", ColumnType.DOUBLE),
                                                     DefinedColumn("s", ColumnType.STRING),
                                                     DefinedColumn("f", ColumnType.BOOLEAN)),
                                    options=TableOptions(max_versions=5, max_time_deviation=MAX_TIME_DEVIATION)))
    for (id_, k), cells in VERSIONED_ROWS:
        client.put_row(table, [("id", id_), ("k", k)], [(name, value, ts) for name, versions in cells.items()
                                                        for ts, value in versions])
    in_range = {"time_range_start": 2000, "time_range_end": 4000}
    mixed = ("id long, k string, i long, d double, s string, f boolean, "
             "h array<struct<timestamp: long, value: long>>")
    reads: list[tuple[dict[str, Any], list[str]]] = [
        (in_range, SCALAR_PREDICATES),  # the default schema: the newest version in the range
        ({**in_range, "schema": mixed, "max_versions": 3}, SCALAR_PREDICATES),  # scalars next to a versioned column
        ({**in_range, "schema": "id long, k string, i long, d double, s string, f boolean", "max_versions": 3},
         ["id IN (1, 3, 7, 42)", "i = 5", "i <> 5", "d < 3.0", "s >= 'b'", "f = true", "f IS NULL", "s IS NOT NULL"]),
        ({**in_range, "max_versions": 3}, VERSIONED_PREDICATES + ["i IS NULL", "f IS NOT NULL"]),  # all versioned
        ({"max_versions": 3}, ["id = 7", "id >= 7", "id IN (1, 3, 7, 42)", "d IS NULL"]),
    ]
    # the data is what the test is about: the newest version in the range is not the newest overall
    first = {r["id"]: r for r in _read(spark, connection, table, **in_range).where("k = 'a'").collect()}
    assert (first[1]["i"], first[1]["d"], first[1]["s"], first[1]["f"]) == (5, 2.5, "b", True)
    newest = {r["id"]: r for r in _read(spark, connection, table).where("k = 'a'").collect()}
    assert (newest[1]["i"], newest[1]["d"], newest[1]["s"], newest[1]["f"]) == (6, -1.0, "c", False)
    mismatches = []
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        for options, predicates in reads:
            for predicate in predicates:
                on = _rows(_read(spark, connection, table, **options).where(predicate))
                off = _rows(_read(spark, connection, table, pushdown="false", **options).where(predicate))
                if not _same(on, off):
                    mismatches.append((options, predicate, on, off))
        assert sorted(r[0] for r in _rows(_read(spark, connection, table, **in_range).where("i = 5"))) == [1, 7]
        assert sorted(r[0] for r in _rows(_read(spark, connection, table, **in_range).where("s = 'b'"))) == [1, 4, 7]
        plan = _read(spark, connection, table, **in_range).where("s = 'b'")._jdf.queryExecution().optimizedPlan()
        assert "Filter" not in plan.toString(), plan.toString()  # pushed, and exact, with a time range too
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert mismatches == []


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"requests": 0, "rows": 0}
    original = TableClient.get_range

    def get_range(self: Any, *args: Any, **kwargs: Any) -> Any:
        rows, next_key = original(self, *args, **kwargs)
        counts["requests"] += 1
        counts["rows"] += len(decode_rows(rows.data)) if rows.data else 0  # a copy: the read's own stays encoded
        return rows, next_key

    monkeypatch.setattr(TableClient, "get_range", get_range)
    return counts


def _read_directly(reader: TablestoreReader) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            out += batch.to_pylist()
    return out


def test_pushdown_drops_the_rows_the_server_returns(spark: Any, connection: dict[str, str], typed: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThan, IsNotNull

    schema = _read(spark, connection, typed).schema
    options = SourceOptions.parse({**connection, "table": typed})
    counts = _counting(monkeypatch)
    assert len(_read_directly(TablestoreReader(options, schema))) == len(TYPED_ROWS)
    full = counts["rows"]
    assert full == len(TYPED_ROWS)

    key_reader = TablestorePushdownReader(options, schema)
    assert list(key_reader.pushFilters([EqualTo(("id",), 7)])) == []
    counts["rows"] = 0
    assert sorted(r["k"] for r in _read_directly(key_reader)) == ["a", "b"]
    assert counts["rows"] == 2

    column_reader = TablestorePushdownReader(options, schema)
    remaining = list(column_reader.pushFilters([IsNotNull(("s",)), EqualTo(("s",), "b"), GreaterThan(("i",), 0)]))
    assert [type(f).__name__ for f in remaining] == ["GreaterThan"]  # INTEGER: Spark checks it again
    counts["rows"] = 0
    assert sorted(r["id"] for r in _read_directly(column_reader)) == [7, 8]
    assert counts["rows"] == 2 < full


def test_partitions_follow_the_split_points(spark: Any, connection: dict[str, str], client: TableClient) -> None:
    client.create_table(TableSchema(BIG, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    client.write_rows([_put(BIG, i) for i in range(2400)])
    df = _read(spark, connection, BIG, split_size_mb=1, page_rows=100)
    assert df.rdd.getNumPartitions() >= 8
    ids = [r["id"] for r in df.select("id").collect()]
    assert sorted(ids) == list(range(2400))  # every row once
    assert _read(spark, connection, BIG, split_size_mb=1, max_split_count=3).rdd.getNumPartitions() == 3
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        narrowed = _read(spark, connection, BIG, split_size_mb=1).where("id >= 100 AND id < 300")
        assert narrowed.rdd.getNumPartitions() < df.rdd.getNumPartitions()
        assert sorted(r["id"] for r in narrowed.collect()) == list(range(100, 300))
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def _put(table: str, i: int) -> Any:
    return RowWrite(table, WriteType.PUT, (("id", i),), (Column("blob", "p" * 4000),))
