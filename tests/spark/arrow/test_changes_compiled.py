"""The Arrow batches filled in C from objects against the Python builders: the change log
(``_speedups.change_log_arrays`` vs ``objects_to_arrow_python``) and the data source's flat rows
(``_speedups.flat_arrays`` vs ``RowsToArrow.batch_python``).

Both get the same seeded-random records (every value type in keys and cells, nulls, deletes of one and of all
versions, increments, many versions, empty and 1 MB values, with and without sequence info), as built and as
decoded from PlainBuffer; the tables must be equal (``Table.equals``, schema included). Records the fast path
leaves to Python (value subclasses, bytes-likes, out-of-range integers, sentinels) must give the Python path's
table or its error. The flat batches get random rows of every type (nulls, missing cells, many versions, a
null newest version) in every schema of key, cell and corrupt-record columns; a cell that does not fit its
column must leave the batch to the Python path (PERMISSIVE's nulls and description, FAILFAST's error). The
compiled module must be built, unless ``TABLESTORE_PLAINBUFFER_OPTIONAL=1``.
"""

from __future__ import annotations

import enum
import importlib
import math
import os
import random
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ActionType,
    CellOp,
    Column,
    ColumnType,
    Record,
    Row,
    SequenceInfo,
)
from airflow_tablestore.client.plainbuffer.decode import decode_record_list_python
from airflow_tablestore.client.plainbuffer.encode import encode_row
from airflow_tablestore.spark.arrow import changes
from airflow_tablestore.spark.arrow import values as arrow
from airflow_tablestore.spark.arrow.changes import CHANGE_SCHEMA, objects_to_arrow_compiled, objects_to_arrow_python
from airflow_tablestore.spark.arrow.values import CELL, CORRUPT, KEY, VERSIONS, CellTypeError, OutputField, RowsToArrow

SEED = 20260622
TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def compiled(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    try:
        module = importlib.import_module("airflow_tablestore.client.plainbuffer._speedups")
    except ImportError as exc:
        if os.environ.get("TABLESTORE_PLAINBUFFER_OPTIONAL") == "1":
            pytest.skip(f"the compiled module is not built (optional here): {exc}")
        raise AssertionError("the compiled Arrow module is not built; `pip install -e .` builds it") from exc
    # also under TABLESTORE_PLAINBUFFER=python, which leaves objects_to_arrow on the Python path
    monkeypatch.setattr(changes, "_change_log_arrays", module.change_log_arrays)
    monkeypatch.setattr(arrow, "_flat_arrays", module.flat_arrays)
    return module


def _value(rng: random.Random) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.randint(-2**63, 2**63 - 1)
    if kind == 1:
        return rng.choice([0, -1, 1, 2**63 - 1, -2**63])
    if kind == 2:
        return rng.uniform(-1e300, 1e300) if rng.random() < 0.5 else rng.choice([0.0, 1.5, -2.25, math.inf])
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD7FF),
                                       rng.randrange(0x10000, 0x10FFFF)])) for _ in range(rng.randrange(12)))
    if kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
    if kind == 6:
        return rng.choice(["", b""])
    if kind == 7:
        return None
    return rng.choice(["x" * (1 << 20), b"\x00" * (1 << 20), "é" * 70_000])


def _key(rng: random.Random) -> Any:
    return rng.choice([rng.randint(-2**63, 2**63 - 1), f"k{rng.randrange(10**6)}", rng.randbytes(rng.randrange(9))])


def random_record(rng: random.Random, *, large: bool = True) -> Record:
    pk = tuple((f"pk{i}", _key(rng)) for i in range(rng.randint(1, 4)))
    columns: list[Column] = []
    for c in range(rng.choice([0, 1, 3, 8])):
        name = f"c{c}" if rng.random() < 0.9 else "é名"
        for v in range(rng.choice([1, 1, 2, 5])):
            op = rng.choice([CellOp.PUT, CellOp.PUT, CellOp.PUT, CellOp.DELETE_ONE_VERSION,
                             CellOp.DELETE_ALL_VERSIONS, CellOp.INCREMENT])
            value = _value(rng)
            while not large and isinstance(value, str | bytes) and len(value) > 1000:
                value = _value(rng)
            if op is CellOp.PUT:
                columns.append(Column(name, value, rng.choice([None, TS - v, 0, -1]), op))
            elif op is CellOp.DELETE_ONE_VERSION:
                columns.append(Column(name, None, TS - v, op))
            elif op is CellOp.DELETE_ALL_VERSIONS:
                columns.append(Column(name, None, None, op))
            else:
                columns.append(Column(name, rng.randint(-100, 100), None, op))
    sequence = None
    if rng.random() < 0.6:
        sequence = SequenceInfo(rng.randrange(2**31), rng.randrange(2**62), rng.randrange(2**31))
    return Record(rng.choice(list(ActionType)), pk, tuple(columns), sequence)


def assert_same(records: Any, first_index: int = 0) -> pa.Table:
    expected = objects_to_arrow_python(records, "channel-1", "chunk-1", first_index)
    got = objects_to_arrow_compiled(records, "channel-1", "chunk-1", first_index)
    assert got is not None, "the compiled path refused records it should take"
    assert got.schema == CHANGE_SCHEMA
    got.validate(full=True)
    assert got.equals(expected), (got.to_pylist()[:3], expected.to_pylist()[:3])
    return got


def test_random_records_equal() -> None:
    rng = random.Random(SEED)
    for size in (0, 1, 2, 7, 64, 500):
        records = [random_record(rng, large=size < 100) for _ in range(size)]
        assert_same(records, first_index=rng.randrange(10**9))
        assert_same(tuple(records))


def test_decoded_records_equal() -> None:
    """Records as the consumer gets them: decoded from PlainBuffer (the model's exact types)."""
    rng = random.Random(SEED + 1)
    rows = []
    for _ in range(400):
        record = random_record(rng, large=False)
        columns = tuple(c for c in record.columns if c.value is not None or c.op is not CellOp.PUT)
        rows.append(encode_row(Row(record.primary_key, columns, sequence=record.sequence)))
    decoded = decode_record_list_python(rows)
    records = [Record(ActionType.PUT_ROW, r.primary_key, r.columns, r.sequence) for r in decoded]
    assert_same(records)


def test_objects_to_arrow_takes_the_compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [random_record(random.Random(SEED + 2), large=False)]
    monkeypatch.setattr(changes, "objects_to_arrow_python", lambda *a: pytest.fail("the Python path ran"))
    assert changes.objects_to_arrow(records, "c", "k").num_rows == 1


def test_doubles_bit_for_bit() -> None:
    values = [math.nan, -math.nan, -0.0, 0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308]
    records = [Record(ActionType.PUT_ROW, (("id", i),), (Column("d", v, TS),)) for i, v in enumerate(values)]
    got = objects_to_arrow_compiled(records, "c", "k")
    expected = objects_to_arrow_python(records, "c", "k")
    assert got is not None

    def bits(table: pa.Table) -> list[bytes]:
        return [struct.pack("<d", row["columns"][0]["double_value"]) for row in table.to_pylist()]

    assert bits(got) == bits(expected) == [struct.pack("<d", v) for v in values]


class _Int(int):
    pass


class _Str(str):
    pass


class _Flag(enum.IntEnum):
    ON = 1


@pytest.mark.parametrize("value", [
    _Int(5), _Str("s"), _Flag.ON, bytearray(b"ab"), memoryview(b"cd"), 2**63, -2**63 - 1, INF_MIN, INF_MAX, [1],
    "\ud800",
], ids=["int-subclass", "str-subclass", "int-enum", "bytearray", "memoryview", "int-too-big", "int-too-small",
        "inf-min", "inf-max", "list", "lone-surrogate"])
@pytest.mark.parametrize("where", ["key", "cell"])
def test_values_left_to_python(value: Any, where: str) -> None:
    """The fast path declines; objects_to_arrow then gives the Python path's table, or raises its error."""
    pk: tuple[tuple[str, Any], ...] = (("id", value),) if where == "key" else (("id", 1),)
    columns = (Column("v", value, TS),) if where == "cell" else ()
    records = [Record(ActionType.PUT_ROW, (("id", 0),), ()), Record(ActionType.UPDATE_ROW, pk, columns)]
    assert objects_to_arrow_compiled(records, "c", "k") is None
    assert_outcomes_equal(changes.objects_to_arrow, objects_to_arrow_python, records, "c", "k")


@pytest.mark.parametrize("record", [
    Record(ActionType.PUT_ROW, (("id", 1),), (Column("v", 1, True),)),  # bool timestamp
    Record(ActionType.PUT_ROW, (("id", 1),), (Column("v", 1, 2**64),)),  # timestamp out of range
    Record(ActionType.PUT_ROW, (("id", 1),), (Column("v", 1, TS, 99),)),  # type: ignore[arg-type]  # unknown op
    Record(99, (("id", 1),), ()),  # type: ignore[arg-type]  # unknown action
    Record(ActionType.PUT_ROW, [("id", 1)], ()),  # type: ignore[arg-type]  # a list, not a tuple
    Record(ActionType.PUT_ROW, ((b"id", 1),), ()),  # a bytes name
    Record(ActionType.PUT_ROW, (("id", 1),), (), SequenceInfo(1, 2**64, 0)),
    Record(ActionType.PUT_ROW, (("id", 1),), (), SequenceInfo(None, None, None)),  # type: ignore[arg-type]
], ids=["bool-ts", "big-ts", "unknown-op", "unknown-action", "pk-list", "bytes-name", "big-seq", "none-seq"])
def test_odd_records_left_to_python(record: Record) -> None:
    assert objects_to_arrow_compiled([record], "c", "k") is None
    assert_outcomes_equal(changes.objects_to_arrow, objects_to_arrow_python, [record], "c", "k")


def assert_outcomes_equal(run: Callable[..., Any], reference: Callable[..., Any], *args: Any) -> None:
    """``run(*args)`` gives what ``reference(*args)`` gives: an equal table, or the same error and message."""
    try:
        expected = reference(*args)
    except Exception as exc:  # noqa: BLE001 (any error, compared by class and message)
        with pytest.raises(type(exc)) as raised:
            run(*args)
        assert str(raised.value) == str(exc)
        return
    assert run(*args).equals(expected)


def test_not_a_sequence() -> None:
    with pytest.raises(TypeError, match="records must be a sequence"):
        objects_to_arrow_compiled(5, "c", "k")  # type: ignore[arg-type]


def test_without_the_compiled_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changes, "_change_log_arrays", None)
    records = [random_record(random.Random(SEED + 3), large=False)]
    assert objects_to_arrow_compiled(records, "c", "k") is None
    assert changes.objects_to_arrow(records, "c", "k").equals(objects_to_arrow_python(records, "c", "k"))


# ---- flat rows (the data source's RowsToArrow) --------------------------------------------------------------

ARROW_OF = {ColumnType.INTEGER: pa.int64(), ColumnType.DOUBLE: pa.float64(), ColumnType.BOOLEAN: pa.bool_(),
            ColumnType.STRING: pa.string(), ColumnType.BINARY: pa.binary()}
SAMPLES: dict[ColumnType, Callable[[random.Random], Any]] = {
    ColumnType.INTEGER: lambda rng: rng.choice([rng.randint(-2**63, 2**63 - 1), 0, -1]),
    ColumnType.DOUBLE: lambda rng: rng.choice([rng.uniform(-1e9, 1e9), -0.0, math.inf, 5e-324]),
    ColumnType.BOOLEAN: lambda rng: rng.random() < 0.5,
    ColumnType.STRING: lambda rng: rng.choice(["", "é中文🙂", f"user-{rng.randrange(10**6)}", "x" * 70_000]),
    ColumnType.BINARY: lambda rng: rng.choice([b"", b"\x00\xff", rng.randbytes(rng.randrange(40))]),
}
KEY_KINDS = [ColumnType.INTEGER, ColumnType.STRING, ColumnType.BINARY]


def flat_case(rng: random.Random, corrupt: bool) -> tuple[RowsToArrow, RowsToArrow, list[tuple[str, ColumnType]],
                                                          list[ColumnType]]:
    keys = [rng.choice(KEY_KINDS) for _ in range(rng.randint(1, 3))]
    cells = [(f"c{i}", rng.choice(list(ColumnType))) for i in range(rng.randint(0, 6))]
    fields = [OutputField(f"pk{i}", KEY, kind, i) for i, kind in enumerate(keys)]
    fields += [OutputField(name, CELL, kind) for name, kind in cells]
    if corrupt:
        fields.append(OutputField("_corrupt_record", CORRUPT))
    rng.shuffle(fields)
    schema = pa.schema([pa.field(f.name, ARROW_OF[f.type] if f.type else pa.string(), nullable=f.source != KEY)
                        for f in fields])
    return (RowsToArrow(fields, schema, failfast=False), RowsToArrow(fields, schema, failfast=True), cells, keys)


def attribute_columns(rng: random.Random, r: int, cells: list[tuple[str, ColumnType]], *,
                      nulls: bool = True) -> list[Column]:
    """Row ``r``'s attribute cells: each column missing, or one or several versions (newest first); with ``nulls``,
    a tenth of the versions are NULL (then the next one counts; the encoder writes none, so straight-from-bytes
    tests leave them out)."""
    columns = []
    for name, kind in cells + [("other", ColumnType.STRING)]:
        for _ in range(rng.choice([0, 1, 1, 3])):
            value = None if nulls and rng.random() < 0.1 else SAMPLES[kind](rng)
            columns.append(Column(name, value, TS - r))
    return columns


def flat_rows(rng: random.Random, n: int, cells: list[tuple[str, ColumnType]], keys: list[ColumnType]) -> list[Row]:
    rows = []
    for r in range(n):
        pk = tuple((f"pk{i}", SAMPLES[kind](rng)) for i, kind in enumerate(keys))
        columns = attribute_columns(rng, r, cells)
        rows.append(Row(pk, tuple(sorted(columns, key=lambda c: c.name))))
    return rows


def test_flat_random_rows_equal() -> None:
    rng = random.Random(SEED + 10)
    for case in range(60):
        permissive, failfast, cells, keys = flat_case(rng, corrupt=case % 2 == 0)
        assert permissive._flat_specs is not None
        rows = flat_rows(rng, rng.choice([0, 1, 5, 200]), cells, keys)
        for converter in (permissive, failfast):
            got = converter.batch_compiled(rows)
            assert got is not None
            got.validate(full=True)
            expected = converter.batch_python(rows)
            assert got.schema == expected.schema
            assert got.equals(expected), (got.to_pylist()[:2], expected.to_pylist()[:2])


def _mismatched(kind: ColumnType) -> list[Any]:
    others = [SAMPLES[k](random.Random(1)) for k in ColumnType if k is not kind]
    if kind is ColumnType.BINARY:
        others += [bytearray(b"x"), memoryview(b"y")]
    return [*others, INF_MIN, _Int(3) if kind is not ColumnType.INTEGER else 2**64, _Str("s")]


@pytest.mark.parametrize("kind", list(ColumnType))
def test_flat_mismatches_take_the_python_path(kind: ColumnType) -> None:
    """A cell that does not fit its column: the Python path's nulls and description, or its error."""
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("c", CELL, kind),
              OutputField("_corrupt_record", CORRUPT)]
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("c", ARROW_OF[kind]),
                        pa.field("_corrupt_record", pa.string())])
    for value in _mismatched(kind):
        rows = [Row((("id", 1),), (Column("c", SAMPLES[kind](random.Random(2)), TS),)),
                Row((("id", 2),), (Column("c", value, TS),))]
        permissive = RowsToArrow(fields, schema, failfast=False)
        assert permissive.batch_compiled(rows) is None
        assert_outcomes_equal(permissive.batch, permissive.batch_python, rows)
        failfast = RowsToArrow(fields, schema, failfast=True)
        assert failfast.batch_compiled(rows) is None
        assert_outcomes_equal(failfast.batch, failfast.batch_python, rows)


@pytest.mark.parametrize("rows", [
    [Row((("id", "text"),))],  # a key of the wrong type (never nullable: an error even in PERMISSIVE)
    [Row((("id", None),))],
    [Row(())],  # no key at all
], ids=["key-type", "key-null", "key-missing"])
def test_flat_bad_keys_take_the_python_path(rows: list[Row]) -> None:
    fields = [OutputField("id", KEY, ColumnType.INTEGER)]
    converter = RowsToArrow(fields, pa.schema([pa.field("id", pa.int64(), False)]), failfast=False)
    assert converter.batch_compiled(rows) is None
    assert_outcomes_equal(converter.batch, converter.batch_python, rows)


def test_flat_versions_take_the_compiled_path() -> None:
    """Every version in the row's order, a NULL one and one without a timestamp included; no cell: null
    (tests/spark/arrow/test_flat_straight.py compares random rows)."""
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("v", VERSIONS, ColumnType.INTEGER)]
    value_type = pa.struct([pa.field("timestamp", pa.int64(), False), pa.field("value", pa.int64())])
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.list_(value_type))])
    converter = RowsToArrow(fields, schema, failfast=False)
    assert converter._flat_specs == ((0, 0, 0), (3, 0, 0))
    rows = [Row((("id", 1),), (Column("v", 2, TS), Column("v", None, None), Column("v", 1, TS - 1))),
            Row((("id", 2),), (Column("w", 3, TS),))]
    got = converter.batch_compiled(rows)
    assert got is not None and got.equals(converter.batch_python(rows))
    assert got.to_pylist() == [{"id": 1, "v": [{"timestamp": TS, "value": 2}, {"timestamp": None, "value": None},
                                               {"timestamp": TS - 1, "value": 1}]}, {"id": 2, "v": None}]


def test_flat_batch_takes_the_compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("s", CELL, ColumnType.STRING)]
    converter = RowsToArrow(fields, pa.schema([pa.field("id", pa.int64(), False), pa.field("s", pa.string())]),
                            failfast=True)
    monkeypatch.setattr(converter, "batch_python", lambda rows: pytest.fail("the Python path ran"))
    assert converter.batch([Row((("id", 1),), (Column("s", "x"),))]).to_pylist() == [{"id": 1, "s": "x"}]


def test_flat_failfast_string_in_a_long_column() -> None:
    """The existing behaviour for a type mismatch: FAILFAST raises CellTypeError naming key, column and types."""
    fields = [OutputField("id", KEY, ColumnType.INTEGER), OutputField("n", CELL, ColumnType.INTEGER)]
    converter = RowsToArrow(fields, pa.schema([pa.field("id", pa.int64(), False), pa.field("n", pa.int64())]),
                            failfast=True, spark_types=["bigint", "bigint"])
    rows = [Row((("id", 1),), (Column("n", 5),)), Row((("id", 7),), (Column("n", "five"),))]
    with pytest.raises(CellTypeError, match=r"row \(id=7\), column 'n': the cell is STRING, but the schema says "
                                            r"bigint \(Tablestore INTEGER\)"):
        converter.batch(rows)
