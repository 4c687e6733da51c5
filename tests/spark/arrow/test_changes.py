"""Record conversions: replica writes and the Arrow change log (exact round trip for every type)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_tablestore.client.model import (
    ActionType,
    CellOp,
    Column,
    Record,
    SequenceInfo,
    WriteType,
)
from airflow_tablestore.spark.arrow.changes import (
    CHANGE_SCHEMA,
    arrow_to_records,
    iter_record_batches,
    objects_to_arrow,
    record_to_write,
)

PK = (("id", 7), ("name", "a"), ("blob", b"\x00\xff"))
SEQ = SequenceInfo(1, 1_700_000_000_000_123, 2)


def test_put_row_keeps_every_version() -> None:
    cols = (Column("c", "v2", 2000), Column("c", "v1", 1000), Column("n", 1.5, 1000))
    write = record_to_write("dst", Record(ActionType.PUT_ROW, PK, cols, SEQ))
    assert write is not None
    assert write.type == WriteType.PUT and write.table == "dst" and write.primary_key == PK
    assert write.columns == cols


def test_update_row_keeps_ops_and_timestamps() -> None:
    cols = (Column("a", 1, 5), Column("b", None, 6, CellOp.DELETE_ONE_VERSION),
            Column("c", None, None, CellOp.DELETE_ALL_VERSIONS))
    write = record_to_write("dst", Record(ActionType.UPDATE_ROW, PK, cols, SEQ))
    assert write is not None and write.type == WriteType.UPDATE and write.columns == cols


def test_delete_row_and_empty_update() -> None:
    write = record_to_write("dst", Record(ActionType.DELETE_ROW, PK, (), SEQ))
    assert write is not None and write.type == WriteType.DELETE and write.columns == ()
    assert record_to_write("dst", Record(ActionType.UPDATE_ROW, PK, (), SEQ)) is None


values = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.booleans(), st.text(max_size=20),
    st.binary(max_size=20),
)
pk_values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=10), st.binary(max_size=10))
columns = st.one_of(
    st.builds(Column, st.text(min_size=1, max_size=5), values, st.integers(0, 2**40), st.just(CellOp.PUT)),
    st.builds(Column, st.text(min_size=1, max_size=5), st.none(), st.integers(0, 2**40),
              st.just(CellOp.DELETE_ONE_VERSION)),
    st.builds(Column, st.text(min_size=1, max_size=5), st.none(), st.none(), st.just(CellOp.DELETE_ALL_VERSIONS)),
)
records = st.builds(
    Record,
    st.sampled_from(list(ActionType)),
    st.lists(st.tuples(st.text(min_size=1, max_size=5), pk_values), min_size=1, max_size=3).map(tuple),
    st.lists(columns, max_size=4).map(tuple),
    st.one_of(st.none(), st.builds(SequenceInfo, st.integers(0, 5), st.integers(0, 2**60), st.integers(0, 99))),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(records, max_size=8))
def test_change_log_round_trip_is_exact(recs: list[Record]) -> None:
    table = objects_to_arrow(recs, "ch_1", "abc", first_index=5)
    assert table.schema == CHANGE_SCHEMA
    assert table.column("record_index").to_pylist() == list(range(5, 5 + len(recs)))
    back = arrow_to_records(table)
    assert back == [r._replace(origin_columns=None) for r in recs]
    # bool stays bool and int stays int (bool is an int subclass in Python)
    for original, again in zip(recs, back, strict=True):
        for c1, c2 in zip(original.columns, again.columns, strict=True):
            assert type(c1.value) is type(c2.value)


def test_iter_record_batches_numbers_rows_continuously() -> None:
    recs = [Record(ActionType.PUT_ROW, (("id", i),), (Column("c", i, 1),)) for i in range(25)]
    batches = list(iter_record_batches(recs, "ch", "k", batch_rows=10))
    assert [b.num_rows for b in batches] == [10, 10, 5]
    indexes = [i for b in batches for i in b.column("record_index").to_pylist()]
    assert indexes == list(range(25))
