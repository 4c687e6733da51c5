"""The shared rows -> Arrow core: exact types, the reader modes, versions, and the change log's typed values."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from airflow_tablestore.client.model import INF_MIN, Column, ColumnType, Row
from airflow_tablestore.spark.arrow.values import (
    CELL,
    CORRUPT,
    KEY,
    VERSIONS,
    CellTypeError,
    OutputField,
    RowsToArrow,
    TypedValues,
    value_type,
)

EXTREMES = {
    ColumnType.INTEGER: [-(2**63), 2**63 - 1, 0],
    ColumnType.DOUBLE: [math.inf, -math.inf, 5e-324, -0.0, 1.7976931348623157e308],
    ColumnType.BOOLEAN: [True, False],
    ColumnType.STRING: ["", "é中文🙂", "x" * 10_000],
    ColumnType.BINARY: [b"", b"\x00\xff", bytes(range(256))],
}
ARROW = {ColumnType.INTEGER: pa.int64(), ColumnType.DOUBLE: pa.float64(), ColumnType.BOOLEAN: pa.bool_(),
         ColumnType.STRING: pa.string(), ColumnType.BINARY: pa.binary()}


def _converter(fields: list[OutputField], types: list[pa.DataType], failfast: bool = False) -> RowsToArrow:
    schema = pa.schema([pa.field(f.name, t, nullable=f.source != KEY) for f, t in zip(fields, types, strict=True)])
    return RowsToArrow(fields, schema, failfast=failfast)


def test_value_types_are_exact() -> None:
    assert value_type(True) is ColumnType.BOOLEAN and value_type(1) is ColumnType.INTEGER
    assert value_type(1.0) is ColumnType.DOUBLE and value_type("") is ColumnType.STRING
    assert value_type(bytearray(b"x")) is ColumnType.BINARY and value_type(None) is None
    with pytest.raises(TypeError):
        value_type(INF_MIN)


@pytest.mark.parametrize("kind", list(EXTREMES))
def test_every_type_converts_exactly_including_extremes(kind: ColumnType) -> None:
    values = EXTREMES[kind]
    rows = [Row((("id", i),), (Column("c", v, 1000),)) for i, v in enumerate(values)]
    rows.append(Row((("id", len(values)),)))  # the cell is missing: null
    batch = _converter([OutputField("id", KEY, ColumnType.INTEGER), OutputField("c", CELL, kind)],
                       [pa.int64(), ARROW[kind]]).batch(rows)
    assert batch.column(0).to_pylist() == list(range(len(rows)))
    got = batch.column(1).to_pylist()
    assert got[:-1] == values and got[-1] is None
    if kind is ColumnType.DOUBLE:  # -0.0 keeps its sign
        assert [math.copysign(1, v) for v in got[:-1]] == [math.copysign(1, v) for v in values]


def test_permissive_nulls_a_wrong_typed_cell_and_describes_it() -> None:
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("n", CELL, ColumnType.INTEGER),
              OutputField("s", CELL, ColumnType.STRING), OutputField("_corrupt_record", CORRUPT)]
    rows = [Row((("id", 1),), (Column("n", 5), Column("s", "ok"))),
            Row((("id", 2),), (Column("n", "five"), Column("s", b"\x01"))),
            Row((("id", 3),), (Column("n", True),))]  # a BOOLEAN is not an INTEGER
    batch = _converter(fields, [pa.int64(), pa.int64(), pa.string(), pa.string()]).batch(rows)
    assert batch.column(1).to_pylist() == [5, None, None]
    assert batch.column(2).to_pylist() == ["ok", None, None]
    corrupt = batch.column(3).to_pylist()
    assert corrupt[0] is None
    second = json.loads(corrupt[1])
    assert second["primary_key"] == {"id": 2}
    assert second["columns"]["n"] == {"cell_type": "STRING", "schema_type": "int64", "value": "five"}
    assert second["columns"]["s"]["cell_type"] == "BINARY" and second["columns"]["s"]["value"] == "0x01"
    assert json.loads(corrupt[2])["columns"]["n"]["cell_type"] == "BOOLEAN"


def test_failfast_names_the_row_key_the_column_and_both_types() -> None:
    fields = [OutputField("id", KEY, ColumnType.STRING), OutputField("d", CELL, ColumnType.DOUBLE)]
    converter = RowsToArrow(fields, pa.schema([pa.field("id", pa.string(), False), pa.field("d", pa.float64())]),
                            failfast=True, spark_types=["string", "double"])
    with pytest.raises(CellTypeError) as err:
        converter.batch([Row((("id", "k1"),), (Column("d", 1.5),)), Row((("id", "k2"),), (Column("d", 3),))])
    text = str(err.value)
    assert "id='k2'" in text and "'d'" in text and "INTEGER" in text and "double" in text


def test_versions_are_lists_newest_first_with_their_timestamps() -> None:
    struct = pa.struct([pa.field("timestamp", pa.int64(), False), pa.field("value", pa.string())])
    list_type = pa.list_(pa.field("element", struct, False))
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("v", VERSIONS, ColumnType.STRING)]
    rows = [Row((("id", 1),), (Column("v", "new", 2000), Column("v", "old", 1000))),
            Row((("id", 2),), ()),
            Row((("id", 3),), (Column("v", 7, 3000),))]
    batch = _converter(fields, [pa.int64(), list_type]).batch(rows)
    assert batch.column(1).to_pylist() == [
        [{"timestamp": 2000, "value": "new"}, {"timestamp": 1000, "value": "old"}], None,
        [{"timestamp": 3000, "value": None}]]


def test_only_the_newest_version_of_a_cell_column_is_kept() -> None:
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("v", CELL, ColumnType.STRING)]
    rows = [Row((("id", 1),), (Column("other", 1), Column("v", "new", 2000), Column("v", "old", 1000)))]
    assert _converter(fields, [pa.int64(), pa.string()]).batch(rows).column(1).to_pylist() == ["new"]


def test_typed_values_put_each_value_in_its_types_leaf() -> None:
    values = TypedValues()
    for value in (1, 1.5, True, "s", b"b", bytearray(b"x"), None):
        values.add(value)
    arrays = [a.to_pylist() for a in values.arrays()]
    assert arrays[0] == ["INTEGER", "DOUBLE", "BOOLEAN", "STRING", "BINARY", "BINARY", None]
    assert arrays[1] == [1, None, None, None, None, None, None]
    assert arrays[3] == [None, None, True, None, None, None, None]
    assert arrays[5] == [None, None, None, None, b"b", b"x", None]
