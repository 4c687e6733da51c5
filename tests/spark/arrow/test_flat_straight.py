"""Versioned columns and the streaming source's flat schema filled in C, against decode-then-build.

Two gaps of the compiled path are checked here, each against the object path it stands in for (decode to
``Row``/``Record`` objects, then the Python builders): versioned columns (``list<struct<timestamp, value>>``,
every version newest first) in ``_speedups.flat_arrays`` and ``flat_from_rows`` (the batch data source),
and ``flat_from_records`` (tunnel records -> the streaming source's user-schema batch: each column's newest PUT
value, the action). Random rows and records of every type (many versions, deletes, NULL and absent values,
cells without a timestamp, equal timestamps, cells of another type), PERMISSIVE and FAILFAST, corrupt bytes,
bad spans and action types, origin records: the same batch, or the straight path refuses and the object path
gives its batch or raises its error. Then both reads end to end against the emulator (no Spark): a versioned
batch read and a user-schema stream read give the same rows straight as decoded.
"""

from __future__ import annotations

import math
import random
import struct
from array import array
from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from airflow_tablestore.client.model import ActionType, CellOp, Column, ColumnType, Record, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.decode import decode_rows
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.records import Records
from airflow_tablestore.client.replica import TOMBSTONE_SUFFIX, is_tombstone
from airflow_tablestore.spark.arrow import changes
from airflow_tablestore.spark.arrow import values as arrow
from airflow_tablestore.spark.arrow.values import CELL, CORRUPT, KEY, VERSIONS, OutputField, RowsToArrow
from airflow_tablestore.spark.datasource.schema import SPARK_TYPES, arrow_schema, versions_type
from airflow_tablestore.spark.stream.output import ACTION_COLUMN, ChangeOutput
from spark.arrow.test_arrow_straight import COMPILED, _decoder_tests, arrow_c, corruptions, outcome, same
from spark.arrow.test_changes_compiled import KEY_KINDS, SAMPLES

SEED = 20261127
TS = 1_700_000_000_000
FENCE = "_tunnel_seq"
needs_c = pytest.mark.skipif(arrow_c is None or not COMPILED, reason="the compiled modules are not in use")
cell, row, seq_block, extension, H = (getattr(_decoder_tests(), name)
                                      for name in ("cell", "row", "seq_block", "extension", "H"))


def same_outcome(got: Any, expected: Any) -> bool:
    """Two :func:`outcome` results: equal batches (a list of them), or the same error class and message."""
    if got[0] != expected[0]:
        return False
    if got[0] == "error":
        return bool(got == expected)
    a, b = got[1], expected[1]
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return same(a, b)


def _misfit(rng: random.Random, kind: ColumnType) -> Any:
    return SAMPLES[rng.choice([k for k in ColumnType if k is not kind])](rng)


# ---- a mini encoder for what the project's encoder refuses: NULL values --------------------------------------------


def _pb_value(value: Any) -> bytes:
    if value is None:
        return b"\x06"
    if isinstance(value, bool):
        return b"\x02" + bytes((value,))
    if isinstance(value, int):
        return b"\x00" + struct.pack("<q", value)
    if isinstance(value, float):
        return b"\x01" + struct.pack("<d", value)
    data = value.encode() if isinstance(value, str) else value
    return (b"\x03" if isinstance(value, str) else b"\x07") + struct.pack("<I", len(data)) + data


def pb_row(row_: Row) -> bytes:
    """One row with a PUT cell of value None written as NULL (the encoder refuses those); no header."""
    pk = [cell(name.encode(), _pb_value(value)) for name, value in row_.primary_key]
    cells = []
    for c in row_.columns:
        value = _pb_value(c.value) if c.op in (CellOp.PUT, CellOp.INCREMENT) else None
        cells.append(cell(c.name.encode(), value, c.timestamp, None if c.op is CellOp.PUT else int(c.op)))
    ext = extension(seq_block(*row_.sequence)) if row_.sequence is not None else b""
    return bytes(row(pk, cells, ext))


# ---- versioned columns in the batch data source -------------------------------------------------------------------


def spark_schema(fields: list[OutputField]) -> StructType:
    """The Spark schema the data source would plan for ``fields`` (keys not null)."""
    return StructType([StructField(f.name, StringType() if f.type is None else versions_type(f.type)
                                   if f.source == VERSIONS else SPARK_TYPES[f.type], nullable=f.source != KEY)
                       for f in fields])


def versioned_case(rng: random.Random, *, corrupt: bool, fence: bool = False) -> tuple[
        RowsToArrow, RowsToArrow, list[tuple[str, ColumnType]], list[ColumnType]]:
    """PERMISSIVE and FAILFAST converters of a random schema of key, cell, versioned (and corrupt-record) columns,
    as the data source builds it from a Spark schema; with ``fence`` the fence column is a versioned string."""
    keys = [rng.choice(KEY_KINDS) for _ in range(rng.randint(1, 3))]
    cells = [(f"c{i}", rng.choice(list(ColumnType))) for i in range(rng.randint(1, 6))]
    fields = [OutputField(f"pk{i}", KEY, kind, i) for i, kind in enumerate(keys)]
    fields += [OutputField(name, VERSIONS if i == 0 or rng.random() < 0.6 else CELL, kind)
               for i, (name, kind) in enumerate(cells)]
    if fence:
        fields.append(OutputField(FENCE, VERSIONS, ColumnType.STRING))
    if corrupt:
        fields.append(OutputField("_corrupt_record", CORRUPT))
    rng.shuffle(fields)
    spark = spark_schema(fields)
    schema, spark_types = arrow_schema(spark), [f.dataType.simpleString() for f in spark.fields]
    return (RowsToArrow(fields, schema, failfast=False, spark_types=spark_types),
            RowsToArrow(fields, schema, failfast=True, spark_types=spark_types), cells, keys)


def versioned_rows(rng: random.Random, n: int, cells: list[tuple[str, ColumnType]], keys: list[ColumnType], *,
                   nulls: bool, misfits: float = 0.0, fences: bool = False) -> list[Row]:
    """Rows with up to 6 versions per column (none: the column is absent), timestamps newest first with some
    missing or equal; with ``nulls`` a tenth of the values are None, ``misfits`` the share of another type;
    with ``fences`` tombstones, fence-only rows and live fences of several versions."""
    rows = []
    for r in range(n):
        pk = tuple((f"pk{i}", SAMPLES[kind](rng)) for i, kind in enumerate(keys))
        columns: list[Column] = []
        if fences and rng.random() < 0.25:  # a tombstone, or a fence alone that is not one
            for v in range(rng.choice([1, 2, 3])):
                value = rng.choice([f"{r}{TOMBSTONE_SUFFIX}", f"{r}-live", 5, b"x", TOMBSTONE_SUFFIX])
                columns.append(Column(FENCE, value, rng.choice([TS - v, TS, None])))
            rows.append(Row(pk, tuple(columns)))
            continue
        for name, kind in [*cells, ("other", ColumnType.STRING)]:
            for v in range(rng.choice([0, 0, 1, 2, 6])):
                value = SAMPLES[kind](rng) if rng.random() >= misfits else _misfit(rng, kind)
                if nulls and rng.random() < 0.1:
                    value = None
                columns.append(Column(name, value, rng.choice([TS - r - v, TS - r - v, TS - r, None, 0])))
        if fences and rng.random() < 0.3:
            columns.append(Column(FENCE, rng.choice([f"{r}{TOMBSTONE_SUFFIX}", "x"]), TS))
        rows.append(Row(pk, tuple(sorted(columns, key=lambda c: c.name))))
    return rows


def test_versions_from_row_objects_equal() -> None:
    rng = random.Random(SEED)
    for case in range(60):
        permissive, failfast, cells, keys = versioned_case(rng, corrupt=case % 2 == 0)
        assert permissive._flat_specs is not None and any(spec[0] == 3 for spec in permissive._flat_specs)
        rows = versioned_rows(rng, rng.choice([0, 1, 5, 200]), cells, keys, nulls=True)
        for converter in (permissive, failfast):
            expected = converter.batch_python(rows)
            got = converter.batch(rows)
            got.validate(full=True)
            assert got.schema == expected.schema and same(got, expected)
            if arrow_c is not None and COMPILED:
                compiled = converter.batch_compiled(rows)
                assert compiled is not None and same(compiled, expected)


def test_versions_misfits_take_the_python_path() -> None:
    """A version of another type anywhere in the batch: PERMISSIVE's nulls and description, FAILFAST's error."""
    rng = random.Random(SEED + 1)
    refused = 0
    for case in range(60):
        permissive, failfast, cells, keys = versioned_case(rng, corrupt=case % 3 != 0)
        rows = versioned_rows(rng, rng.choice([1, 5, 50]), cells, keys, nulls=True, misfits=0.05)
        for converter in (permissive, failfast):
            assert same_outcome(outcome(partial(converter.batch, rows)), outcome(partial(converter.batch_python, rows)))
            refused += converter.batch_compiled(rows) is None
    assert refused > 20


@needs_c
@pytest.mark.parametrize("timestamp", [True, 2**64, "1", 1.0])
def test_odd_timestamps_take_the_python_path(timestamp: Any) -> None:
    permissive, _, cells, keys = versioned_case(random.Random(SEED + 2), corrupt=True)
    rows = versioned_rows(random.Random(SEED + 3), 5, cells, keys, nulls=False)
    name = next(f.name for f in permissive.fields if f.source == VERSIONS)
    kind = next(f.type for f in permissive.fields if f.source == VERSIONS)
    assert kind is not None
    rows.append(Row(rows[0].primary_key, (Column(name, SAMPLES[kind](random.Random(1)), timestamp),)))
    assert permissive.batch_compiled(rows) is None
    assert same_outcome(outcome(lambda: permissive.batch(rows)), outcome(lambda: permissive.batch_python(rows)))


def _page(rng: random.Random, rows: list[Row]) -> bytes:
    """The rows as a GetRange page: the project's encoder, or the mini one where a value is None."""
    if not rows:
        return b""
    if any(c.value is None for r in rows for c in r.columns) or rng.random() < 0.3:
        return H + b"".join(pb_row(r) for r in rows)
    return encode_rows(rows)


FILTERS = [(None, False, None), (FENCE, False, None), (FENCE, True, FENCE), (None, True, None)]


def kept_rows(data: bytes, fence: str | None, drop_empty: bool, ignored: str | None) -> list[Row]:
    """The page's rows the reader keeps (decoded; raises for corrupt bytes)."""
    rows = decode_rows(data) if data else []
    if fence is not None:
        rows = [r for r in rows if not is_tombstone(r.columns, fence)]
    if drop_empty:
        rows = [r for r in rows if any(c.name != ignored for c in r.columns)]
    return rows


def read_page(converter: RowsToArrow, data: bytes, fence: str | None, drop_empty: bool, ignored: str | None, *,
              straight: bool) -> pa.RecordBatch:
    """A page as TablestoreReader.read takes it (``straight``: RowsToArrow.page, from the bytes unless refused), or
    decoded, filtered and built from the rows."""
    if straight:
        return converter.page(Rows(data), tombstone_fence=fence, drop_empty=drop_empty, ignored=ignored)
    return converter.batch(kept_rows(data, fence, drop_empty, ignored))


def test_versions_from_bytes_equal() -> None:
    """flat_from_rows with versioned columns, the tombstone and time-range filters: the object path's batch
    (a row left out drops the versions it appended, even a version of another type)."""
    rng = random.Random(SEED + 4)
    taken = 0
    for case in range(80):
        permissive, failfast, cells, keys = versioned_case(rng, corrupt=case % 2 == 0, fence=case % 3 == 0)
        rows = versioned_rows(rng, rng.choice([0, 1, 5, 120]), cells, keys, nulls=case % 4 == 1,
                              misfits=0.02 if case % 5 == 0 else 0.0, fences=True)
        data = _page(rng, rows)
        for converter in (permissive, failfast):
            for fence, drop_empty, ignored in FILTERS:
                expected = outcome(partial(read_page, converter, data, fence, drop_empty, ignored, straight=False))
                got = converter.page_compiled(Rows(data), tombstone_fence=fence, drop_empty=drop_empty,
                                              ignored=ignored)
                if got is None:  # refused: only where the object path's compiled builder refuses too
                    if arrow_c is not None and COMPILED:
                        assert converter.batch_compiled(kept_rows(data, fence, drop_empty, ignored)) is None
                    continue
                taken += 1
                got.validate(full=True)
                assert expected[0] == "ok" and same(got, expected[1]), (got.to_pylist()[:2], expected)
    assert taken > 300 or arrow_c is None or not COMPILED


def test_versions_from_corrupt_bytes_same_outcome() -> None:
    """A page as the reader takes it (straight, else decode and build): the object path's batch or error."""
    rng = random.Random(SEED + 5)
    permissive, failfast, cells, keys = versioned_case(random.Random(7), corrupt=True, fence=True)
    rows = versioned_rows(rng, 10, cells, keys, nulls=True, fences=True)
    data = _page(rng, rows)
    for converter in (permissive, failfast):
        for bad in corruptions(rng, data, 300) + [data[:4], data[:3], b"\x76" + data[1:]]:
            expected = outcome(partial(read_page, converter, bad, FENCE, False, None, straight=False))
            got = outcome(partial(read_page, converter, bad, FENCE, False, None, straight=True))
            assert same_outcome(got, expected)



def test_a_name_both_cell_and_versions_fills_the_cell_column() -> None:
    """As batch_python does: a schema naming one column twice (a cell and its versions) fills the cell column."""
    fields = [OutputField("k", KEY, ColumnType.INTEGER, 0), OutputField("x", CELL, ColumnType.STRING),
              OutputField("x", VERSIONS, ColumnType.STRING)]
    converter = RowsToArrow(fields, arrow_schema(spark_schema(fields)), failfast=False)
    rows = [Row((("k", i),), (Column("x", f"v{i}", TS), Column("x", "old", TS - 1))) for i in range(3)]
    expected = converter.batch_python(rows)
    assert expected.column(1).to_pylist() == ["v0", "v1", "v2"] and expected.column(2).null_count == 3
    assert converter.batch(rows).equals(expected)
    straight = converter.page_compiled(Rows(encode_rows(rows)))
    assert straight is None or straight.equals(expected)


# ---- the streaming source's user schema ----------------------------------------------------------------------------


def flat_output(rng: random.Random, *, corrupt: bool, action: bool, failfast: bool,
                versioned: bool = False) -> tuple[ChangeOutput, list[tuple[str, ColumnType]], list[ColumnType]]:
    """A ChangeOutput of a random user schema (as ChangeOutput.for_schema builds it, without the table)."""
    keys = [rng.choice(KEY_KINDS) for _ in range(rng.randint(1, 3))]
    cells = [(f"c{i}", rng.choice(list(ColumnType))) for i in range(rng.randint(0, 6))]
    fields = [OutputField(f"pk{i}", KEY, kind, i) for i, kind in enumerate(keys)]
    fields += [OutputField(name, CELL, kind) for name, kind in cells]
    if versioned:
        fields.append(OutputField("v", VERSIONS, ColumnType.STRING))
    if corrupt:
        fields.append(OutputField("_corrupt_record", CORRUPT))
    rng.shuffle(fields)
    spark = spark_schema(fields)
    flat = RowsToArrow(fields, arrow_schema(spark), failfast=failfast,
                       spark_types=[f.dataType.simpleString() for f in spark.fields])
    action_index = rng.randint(0, len(fields)) if action else None
    full = list(spark.fields)
    if action_index is not None:
        full.insert(action_index, StructField(ACTION_COLUMN, StringType()))
    return ChangeOutput(arrow_schema(StructType(full)), flat, action_index), cells, keys


def change_records(rng: random.Random, n: int, cells: list[tuple[str, ColumnType]], keys: list[ColumnType], *,
                   nulls: bool, misfits: float = 0.0) -> list[Record]:
    """Records of every op: PUTs (several versions of a column, timestamps missing, equal or out of order),
    deletes of one and of all versions, increments; NULL values with ``nulls``."""
    records = []
    for _ in range(n):
        pk = tuple((f"pk{i}", SAMPLES[kind](rng)) for i, kind in enumerate(keys))
        columns = []
        for name, kind in [*cells, ("other", ColumnType.STRING)]:
            for _ in range(rng.choice([0, 1, 1, 2, 5])):
                op = rng.choice([CellOp.PUT] * 4 + [CellOp.DELETE_ONE_VERSION, CellOp.DELETE_ALL_VERSIONS,
                                                    CellOp.INCREMENT])
                ts = rng.choice([None, TS, TS - 1, TS + 1, 0, -1])
                if op is CellOp.PUT:
                    value = SAMPLES[kind](rng) if rng.random() >= misfits else _misfit(rng, kind)
                    columns.append(Column(name, None if nulls and rng.random() < 0.1 else value, ts))
                elif op is CellOp.DELETE_ONE_VERSION:
                    columns.append(Column(name, None, TS if ts is None else ts, op))
                elif op is CellOp.DELETE_ALL_VERSIONS:
                    columns.append(Column(name, None, None, op))
                else:
                    columns.append(Column(name, rng.randint(-9, 9), ts, op))
        rng.shuffle(columns)
        sequence = SequenceInfo(0, rng.randrange(2**62), rng.randrange(2**31)) if rng.random() < 0.7 else None
        records.append(Record(rng.choice(list(ActionType)), pk, tuple(columns), sequence))
    return records


def encoded_records(rng: random.Random, records: list[Record], origins: list[bytes] | None = None) -> Records:
    bodies = []
    for r in records:
        as_row = Row(r.primary_key, r.columns, False, r.sequence)
        nulls = any(c.value is None and c.op is CellOp.PUT for c in r.columns)
        bodies.append(H + pb_row(as_row) if nulls or rng.random() < 0.2 else encode_row(as_row))
    return Records.from_bodies(bodies, [int(r.action) for r in records], origins)


_BATCHES = ChangeOutput.batches  # as defined (a test below wraps it)


def object_batches(output: ChangeOutput, enc: Records) -> Any:
    """ChangeOutput.batches of the records decoded and built from the objects: the straight paths switched off, on
    a fresh copy (nothing cached between the paths)."""
    copy = Records(enc.data, enc.spans, enc.actions, enc.origin_spans)
    copy._raw_actions = enc._raw_actions
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(RowsToArrow, "changes_compiled", lambda self, *a, **k: None)
        patched.setattr(changes, "_change_log_from_bodies", None)
        return outcome(lambda: list(_BATCHES(output, copy, "ch", "chunk", 0)))


def straight_batches(output: ChangeOutput, enc: Records) -> Any:
    return outcome(lambda: list(output.batches(enc, "ch", "chunk", 0)))


def test_flat_changes_equal() -> None:
    rng = random.Random(SEED + 6)
    taken = 0
    for case in range(80):
        output, cells, keys = flat_output(rng, corrupt=case % 2 == 0, action=case % 3 != 0, failfast=case % 4 == 0)
        records = change_records(rng, rng.choice([0, 1, 5, 150]), cells, keys, nulls=case % 2 == 1)
        enc = encoded_records(rng, records)
        expected = object_batches(output, enc)
        assert expected[0] == "ok"
        got = straight_batches(output, enc)
        assert same_outcome(got, expected), (got[1][0].to_pylist()[:2], expected[1][0].to_pylist()[:2])
        for batch in got[1]:
            batch.validate(full=True)
        if arrow_c is not None and COMPILED:
            assert output.flat is not None
            assert output.flat.changes_compiled(enc) is not None
            taken += 1
    assert taken == 80 or arrow_c is None or not COMPILED


def test_flat_changes_misfits_same_outcome() -> None:
    """A newest PUT value of another type: the object path's nulls and description, or FAILFAST's error. A
    misfit that is not the newest PUT (older, deleted) does not count, as in the object path."""
    rng = random.Random(SEED + 7)
    refused = 0
    for case in range(60):
        output, cells, keys = flat_output(rng, corrupt=case % 2 == 0, action=True, failfast=case % 3 == 0)
        enc = encoded_records(rng, change_records(rng, rng.choice([1, 5, 40]), cells, keys, nulls=True,
                                                  misfits=0.1))
        assert same_outcome(straight_batches(output, enc), object_batches(output, enc))
        assert output.flat is not None
        refused += output.flat.changes_compiled(enc) is None
    assert refused > 10 or arrow_c is None or not COMPILED


def test_flat_changes_of_the_decoder_generator_same_outcome() -> None:
    """The decoder tests' rows as records: key sentinels, any value type in any column, deleted rows."""
    rng = random.Random(SEED + 8)
    random_row = _decoder_tests().random_row
    for case in range(150):
        output, _, _ = flat_output(random.Random(case), corrupt=True, action=True, failfast=case % 2 == 0)
        rows = [random_row(rng) for _ in range(rng.randrange(1, 5))]
        enc = Records.from_bodies([encode_row(r) for r in rows], [rng.choice([1, 2, 3]) for _ in rows])
        assert same_outcome(straight_batches(output, enc), object_batches(output, enc))


def test_corrupt_records_same_outcome() -> None:
    rng = random.Random(SEED + 9)
    output, cells, keys = flat_output(random.Random(5), corrupt=True, action=True, failfast=False)
    records = change_records(rng, 12, cells, keys, nulls=True)
    good = encoded_records(rng, records)
    handmade = _decoder_tests().handmade()
    bad_bodies = [b for body in good.bodies for b in corruptions(rng, body, 20)] + handmade
    bad_bodies += [good.bodies[0] + good.bodies[1][4:]]  # two rows: a record must hold one
    for bad in bad_bodies:
        at = rng.randrange(len(good) + 1)
        bodies = [*good.bodies[:at], bad, *good.bodies[at:]]
        enc = Records.from_bodies(bodies, [*good.actions[:at], 2, *good.actions[at:]])
        expected = object_batches(output, enc)
        assert same_outcome(straight_batches(output, enc), expected), bad
        if expected[0] == "error" and arrow_c is not None and COMPILED:
            assert output.flat is not None
            assert output.flat.changes_compiled(enc, with_action=True) is None
    for actions in ([1, 7] + [1] * 10, [0] * 12, [1] * 11 + [300]):  # unknown action types
        enc = Records.from_bodies(good.bodies, actions)
        expected = object_batches(output, enc)
        assert expected[0] == "error" and straight_batches(output, enc) == expected


def test_origin_records_are_checked_not_used() -> None:
    rng = random.Random(SEED + 10)
    output, cells, keys = flat_output(random.Random(6), corrupt=True, action=True, failfast=False)
    good = encoded_records(rng, change_records(rng, 6, cells, keys, nulls=False))
    origins = [good.bodies[-1], b"", good.bodies[0], b"", b"", b""]
    enc = Records.from_bodies(good.bodies, good.actions, origins)
    assert enc.origin_spans is not None
    expected = object_batches(output, enc)
    assert expected[0] == "ok" and same_outcome(straight_batches(output, enc), expected)
    assert same_outcome(expected, object_batches(output, good))  # origins change nothing in the batch
    if arrow_c is not None and COMPILED:
        assert output.flat is not None
        assert output.flat.changes_compiled(enc) is not None
    for bad in [*corruptions(rng, good.bodies[2], 30), good.bodies[0] + good.bodies[1][4:], b"\x75\x00\x00\x00"]:
        enc = Records.from_bodies(good.bodies, good.actions, [b"", bad, b"", b"", b"", b""])
        expected = object_batches(output, enc)
        assert same_outcome(straight_batches(output, enc), expected)


def test_versioned_user_schema_equal() -> None:
    """A versioned column holds every PUT version of the change, newest first (no timestamp counting as 0, equal
    ones in record order; null values and missing timestamps kept): the object path's batch. A version of another
    type gives the object path's nulls and description, or FAILFAST's error."""
    rng = random.Random(SEED + 11)
    taken = 0
    for case in range(60):
        output, cells, keys = flat_output(rng, corrupt=case % 2 == 0, action=True, failfast=case % 3 == 0,
                                          versioned=True)
        misfits = 0.05 if case % 4 == 3 else 0.0
        records = change_records(rng, rng.choice([0, 1, 5, 80]), [*cells, ("v", ColumnType.STRING)], keys,
                                 nulls=case % 2 == 1, misfits=misfits)
        enc = encoded_records(rng, records)
        expected = object_batches(output, enc)
        assert same_outcome(straight_batches(output, enc), expected)
        if arrow_c is not None and COMPILED:
            assert output.flat is not None
            straight = output.flat.changes_compiled(enc)
            assert straight is not None or misfits
            taken += straight is not None
    assert taken >= 45 or arrow_c is None or not COMPILED


@needs_c
def test_spans_and_buffers() -> None:
    """flat_from_records takes any buffer; spans outside the data refuse; lengths that disagree are errors."""
    assert arrow_c is not None
    output, cells, keys = flat_output(random.Random(8), corrupt=False, action=True, failfast=False)
    flat = output.flat
    assert flat is not None
    rng = random.Random(SEED + 12)
    enc = encoded_records(rng, change_records(rng, 4, cells, keys, nulls=False))
    ok = arrow_c.flat_from_records(memoryview(enc.data), bytearray(enc.spans), enc.actions, flat._flat_specs,
                                   flat._flat_names, True)
    assert ok is not None and ok[0] == 4
    spans = list(array("q", enc.spans))
    for i, bad in [(1, -1), (1, len(enc.data) + 1), (0, spans[1] + 1), (3, len(enc.data) + 1)]:
        wrong = spans.copy()
        wrong[i] = bad
        assert arrow_c.flat_from_records(enc.data, array("q", wrong).tobytes(), enc.actions, flat._flat_specs,
                                         flat._flat_names, True) is None
    with pytest.raises(ValueError, match="4 action types but 48 bytes of spans"):
        arrow_c.flat_from_records(enc.data, enc.spans[:48], enc.actions, flat._flat_specs, flat._flat_names, True)
    with pytest.raises(ValueError, match="16 a record"):
        arrow_c.flat_from_records(enc.data, enc.spans, enc.actions, flat._flat_specs, flat._flat_names, True,
                                  b"\x00" * 16)
    with pytest.raises(TypeError):
        arrow_c.flat_from_records("text", enc.spans, enc.actions, flat._flat_specs, flat._flat_names, True)
    empty = arrow_c.flat_from_records(b"", b"", b"", flat._flat_specs, flat._flat_names, False)
    assert empty is not None and empty[0] == 0 and empty[2] is None


def test_the_compiled_switch() -> None:
    assert (arrow._flat_from_records is not None) == (COMPILED and arrow_c is not None)


# ---- end to end against the emulator (no Spark) --------------------------------------------------------------------


@pytest.fixture
def straight_counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the straight paths built a batch (and were refused)."""
    counts = {"rows": 0, "rows refused": 0, "changes": 0, "changes refused": 0}
    page_compiled, changes_compiled = RowsToArrow.page_compiled, RowsToArrow.changes_compiled

    def counting_rows(self: RowsToArrow, *args: Any, **kwargs: Any) -> Any:
        out = page_compiled(self, *args, **kwargs)
        counts["rows" if out is not None else "rows refused"] += 1
        return out

    def counting_changes(self: RowsToArrow, *args: Any, **kwargs: Any) -> Any:
        out = changes_compiled(self, *args, **kwargs)
        counts["changes" if out is not None else "changes refused"] += 1
        return out

    monkeypatch.setattr(RowsToArrow, "page_compiled", counting_rows)
    monkeypatch.setattr(RowsToArrow, "changes_compiled", counting_changes)
    return counts


def _without_straight_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RowsToArrow, "page_compiled", lambda self, *a, **k: None)
    monkeypatch.setattr(RowsToArrow, "changes_compiled", lambda self, *a, **k: None)


def _read_all(reader: Any) -> list[dict[str, Any]]:
    return [row_ for partition in reader.partitions() for batch in reader.read(partition)
            for row_ in batch.to_pylist()]


def test_a_versioned_batch_read_is_the_decoded_one(client: Any, connection: dict[str, str],
                                                   straight_counts: dict[str, int],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablestore.client.model import (
        MAX_TIME_DEVIATION,
        DefinedColumn,
        PrimaryKeyColumn,
        PrimaryKeyType,
        TableOptions,
        TableSchema,
    )
    from airflow_tablestore.spark.datasource.options import SourceOptions
    from airflow_tablestore.spark.datasource.reader import TablestoreReader

    table = "flat_straight_versions"
    client.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    defined_columns=(DefinedColumn("s", ColumnType.STRING),),
                                    options=TableOptions(max_versions=5, max_time_deviation=MAX_TIME_DEVIATION)))
    rng = random.Random(SEED + 13)
    for id_ in range(300):
        cells = []
        for name, kind in (("s", ColumnType.STRING), ("i", ColumnType.INTEGER), ("d", ColumnType.DOUBLE),
                           ("b", ColumnType.BINARY), ("f", ColumnType.BOOLEAN)):
            for v in range(rng.choice([0, 1, 3, 6])):
                value = SAMPLES[kind](rng)
                if isinstance(value, float) and math.isinf(value):
                    value = -0.0  # the service refuses infinities
                if isinstance(value, str) and len(value) > 1000:
                    value = value[:1000]
                cells.append((name, value, 1000 + 10 * v + id_ % 7))
        if id_ == 77:
            cells.append(("i", "not a number", 1025))  # one cell of another type
        client.put_row(table, [("id", id_)], cells)
    schema = StructType([StructField("id", SPARK_TYPES[ColumnType.INTEGER], nullable=False),
                         StructField("s", versions_type(ColumnType.STRING)),
                         StructField("i", versions_type(ColumnType.INTEGER)),
                         StructField("d", SPARK_TYPES[ColumnType.DOUBLE]),
                         StructField("b", versions_type(ColumnType.BINARY)),
                         StructField("f", versions_type(ColumnType.BOOLEAN)),
                         StructField("_corrupt_record", StringType())])
    reads = [({"max_versions": "5", "page_rows": "40"}, schema),
             ({"max_versions": "3", "time_range_start": "1020", "time_range_end": "1050"}, schema),
             ({"max_versions": "5", "mode": "FAILFAST"}, schema),
             ({"max_versions": "5", "mode": "FAILFAST"}, StructType([f for f in schema.fields if f.name != "i"]))]
    straight = []
    for extra, read_schema in reads:
        options = SourceOptions.parse({**connection, "table": table, **extra})
        straight.append(outcome(lambda o=options, s=read_schema: _read_all(TablestoreReader(o, s))))
    if arrow_c is not None and COMPILED:
        assert straight_counts["rows"] >= 8 and straight_counts["rows refused"] >= 1  # the pages with row 77
    _without_straight_paths(monkeypatch)
    for (extra, read_schema), got in zip(reads, straight, strict=True):
        options = SourceOptions.parse({**connection, "table": table, **extra})
        expected = outcome(lambda o=options, s=read_schema: _read_all(TablestoreReader(o, s)))
        assert got == expected, extra
    assert straight[0][0] == "ok" and len(straight[0][1]) == 300 and straight[2][0] == "error"
    assert straight[3][0] == "ok" and all(r["_corrupt_record"] is None for r in straight[3][1])


def _drain(reader: Any) -> list[dict[str, Any]]:
    """availableNow by hand (tests/spark/stream/test_planner.py's drain): every batch's rows."""
    planner = reader.planner
    planner.prepare_available_now()
    start = reader.initialOffset()
    rows: list[dict[str, Any]] = []
    while True:
        end = planner.latest_offset(start, None)
        if end == start:
            return rows
        for partition in reader.partitions(start, end):
            rows += [r for batch in reader.read(partition) for r in batch.to_pylist()]
        planner.commit(end)
        start = end


def test_a_user_schema_stream_read_is_the_decoded_one(client: Any, settings: Any, straight_counts: dict[str, int],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch the stream reader builds straight equals the one built from its records decoded."""
    import dataclasses

    from replication_helpers import make_source

    from airflow_tablestore.spark.datasource.options import SourceOptions
    from airflow_tablestore.spark.stream.reader import TablestoreStreamReader
    from demo import replication as demo

    with settings.tunnel_client() as tunnels:
        make_source(client, tunnels, "flat_straight_src", "feed", 300)
    writes = demo.write_changes(client, "flat_straight_src", 300, 200)
    checked = {"batches": 0}
    batches = ChangeOutput.batches

    def checking(self: ChangeOutput, records: Any, *args: Any) -> Iterator[pa.RecordBatch]:
        got = list(batches(self, records, *args))
        expected = object_batches(self, records)
        assert expected[0] == "ok" and same_outcome(("ok", got), expected)
        checked["batches"] += 1
        yield from got

    monkeypatch.setattr(ChangeOutput, "batches", checking)
    options = dataclasses.replace(SourceOptions(settings=settings, table="flat_straight_src"), tunnel="feed",
                                  settle_ms=100, heartbeat_interval=1.0)
    schema = StructType([StructField("region", StringType()), StructField("id", SPARK_TYPES[ColumnType.INTEGER]),
                         StructField("name", StringType()), StructField("score", SPARK_TYPES[ColumnType.DOUBLE]),
                         StructField(ACTION_COLUMN, StringType())])
    reader = TablestoreStreamReader(options, schema)
    rows = _drain(reader)
    assert len(rows) == 300 + len(writes)
    assert sum(r["_action"] != "PUT_ROW" for r in rows) == sum(w.type.value != "PUT" for w in writes)
    if arrow_c is not None and COMPILED:
        assert checked["batches"] >= 2 and straight_counts["changes"] == checked["batches"]
