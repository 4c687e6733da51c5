"""compute_split_points_by_size against the emulator: split sizes, ranges() covering the table once, errors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from airflow_tablestore.client import (
    INF_MAX,
    INF_MIN,
    Column,
    InvalidParameterError,
    NotFoundError,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RetryPolicy,
    RowWrite,
    SplitLocation,
    SplitPoints,
    TableClient,
    TableSchema,
    TablestoreClientError,
    WriteType,
)
from airflow_tablestore.client.table.ddl import split_points_from_pb, split_size_units
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

INT, STR, BIN = PrimaryKeyType.INTEGER, PrimaryKeyType.STRING, PrimaryKeyType.BINARY


def _fill(client: TableClient, table: str, keys: Sequence[tuple[tuple[str, Any], ...]], payload: int) -> None:
    writes = [RowWrite(table, WriteType.PUT, pk, (Column("v", "x" * payload),)) for pk in keys]
    assert client.write_rows(writes) == len(keys)


def _scan(client: TableClient, table: str, split: SplitPoints) -> list[tuple[tuple[str, Any], ...]]:
    """Every row's key, range after range (duplicates kept, so a double read shows)."""
    return [row.primary_key for start, end in split.ranges() for row in client.iter_range(table, start, end)]


# ---- offline: units, ranges(), response checks ----------------------------------------------------


@pytest.mark.parametrize(("size", "expected"), [
    (100 * 1024 * 1024, (1, 100 * 1024 * 1024)),
    (300 * 1024 * 1024, (3, 100 * 1024 * 1024)),
    (64 * 1024 * 1024, (64, 1024 * 1024)),
    (100 * 1024, (100, 1024)),
    (100_000, (100_000, 1)),
    (1, (1, 1)),
])
def test_split_size_units_are_exact(size: int, expected: tuple[int, int]) -> None:
    assert split_size_units(size) == expected
    split_size, unit = expected
    assert split_size * unit == size


def test_ranges_pad_split_points_with_inf_min() -> None:
    pk = (PrimaryKeyColumn("a", STR), PrimaryKeyColumn("b", INT), PrimaryKeyColumn("c", BIN))
    split = SplitPoints(pk, ((("a", "m"),), (("a", "t"), ("b", 5))), (SplitLocation("x", 2), SplitLocation("", 1)))
    low = (("a", INF_MIN), ("b", INF_MIN), ("c", INF_MIN))
    m = (("a", "m"), ("b", INF_MIN), ("c", INF_MIN))
    t = (("a", "t"), ("b", 5), ("c", INF_MIN))
    high = (("a", INF_MAX), ("b", INF_MAX), ("c", INF_MAX))
    assert split.ranges() == [(low, m), (m, t), (t, high)]
    assert split.range_locations() == ["x", "x", ""]
    whole = SplitPoints(pk[:1], (), (SplitLocation("", 1),))
    assert whole.ranges() == [((("a", INF_MIN),), (("a", INF_MAX),))]


def _response(points: list[bytes], repeats: list[int]) -> Any:
    response = table_pb2.ComputeSplitPointsBySizeResponse()
    response.consumed.capacity_unit.read = 1
    response.schema.add(name="a", type=1)
    response.split_points.extend(points)
    for repeat in repeats:
        response.locations.add(location="", repeat=repeat)
    return response


def test_response_checks_like_the_java_sdk() -> None:
    from airflow_tablestore.client.plainbuffer.encode import encode_primary_key

    point = encode_primary_key((("a", 7),))
    assert split_points_from_pb(_response([point], [1, 1])).split_points == ((("a", 7),),)
    with pytest.raises(TablestoreClientError, match="location repeats") as info:
        split_points_from_pb(_response([point], [1]), "req-1")
    assert info.value.request_id == "req-1"
    with pytest.raises(TablestoreClientError, match="not a prefix"):
        split_points_from_pb(_response([encode_primary_key((("z", 7),))], [2]))
    with pytest.raises(TablestoreClientError, match="split point"):
        split_points_from_pb(_response([b"\x75\x00\x00\x00\x03"], [2]))


# ---- against the emulator -------------------------------------------------------------------------


@pytest.fixture()
def make_table(table_client: TableClient, unique_name: str) -> Iterator[Any]:
    made: list[str] = []

    def make(*pk: PrimaryKeyColumn) -> str:
        name = f"{unique_name}_{len(made)}"
        table_client.create_table(TableSchema(name, pk))
        made.append(name)
        return name

    yield make
    for name in made:
        table_client.delete_table(name)


def test_split_points_of_a_known_size(table_client: TableClient, make_table: Any) -> None:
    table = make_table(PrimaryKeyColumn("id", INT))
    keys = [(("id", i),) for i in range(2000)]
    _fill(table_client, table, keys, 1000)  # ~1 KB rows, ~2 MB in all
    split = table_client.compute_split_points_by_size(table, 100 * 1024)
    assert split.primary_key == (PrimaryKeyColumn("id", INT),)
    assert 17 <= len(split.ranges()) <= 22
    values: list[Any] = [point[0][1] for point in split.split_points]
    assert all(len(point) == 1 for point in split.split_points)
    assert values == sorted(set(values)) and values[0] > 0
    assert sum(loc.repeat for loc in split.locations) == len(split.split_points) + 1
    gaps = [b - a for a, b in zip([0, *values], values, strict=False)]
    assert max(gaps) - min(gaps) <= 2  # even splits of rows of equal size
    assert _scan(table_client, table, split) == keys
    assert table_client.compute_split_points_by_size(table, 100 * 1024 * 1024).split_points == ()


def _key(kinds: tuple[PrimaryKeyType, ...], i: int) -> tuple[tuple[str, Any], ...]:
    """Key ``i``; with more columns, the first repeats (10 rows per value), so split points are prefixes."""
    parts: list[tuple[str, Any]] = []
    for position, kind in enumerate(kinds):
        n = i if len(kinds) == 1 else i // 10 if position == 0 else i % 10 if position == 1 else i
        value: Any = n - 20 if kind is INT else f"k{n:04d}" if kind is STR else b"\x00\x01" + n.to_bytes(2, "big")
        parts.append((f"p{position}", value))
    return tuple(parts)


@pytest.mark.parametrize("kinds", [
    (INT,), (STR,), (BIN,), (STR, INT), (BIN, STR), (INT, BIN), (BIN, STR, INT), (STR, INT, BIN), (INT, STR, BIN),
], ids=lambda kinds: "-".join(k.value for k in kinds))
def test_ranges_cover_the_table_exactly_once(
    table_client: TableClient, make_table: Any, kinds: tuple[PrimaryKeyType, ...]
) -> None:
    table = make_table(*(PrimaryKeyColumn(f"p{i}", kind) for i, kind in enumerate(kinds)))
    keys = [_key(kinds, i) for i in range(300)]
    _fill(table_client, table, keys, 200)
    split = table_client.compute_split_points_by_size(table, 8 * 1024)
    assert len(split.split_points) >= 4
    assert all(len(point) == 1 for point in split.split_points)
    ranges = split.ranges()
    assert all(len(start) == len(end) == len(kinds) for start, end in ranges)
    assert all(value is INF_MIN for _, value in ranges[1][0][1:])
    scanned = _scan(table_client, table, split)
    assert len(scanned) == len(set(scanned)) == len(keys)
    assert set(scanned) == set(keys)
    first_values: list[Any] = [point[0][1] for point in split.split_points]
    assert first_values == sorted(set(first_values)) and first_values[0] != min(k[0][1] for k in keys)


def test_one_first_column_value_is_one_range(table_client: TableClient, make_table: Any) -> None:
    table = make_table(PrimaryKeyColumn("a", STR), PrimaryKeyColumn("b", INT))
    _fill(table_client, table, [(("a", "same"), ("b", i)) for i in range(100)], 500)
    split = table_client.compute_split_points_by_size(table, 1024)
    assert split.split_points == () and len(split.ranges()) == 1


def test_empty_table_is_one_range(table_client: TableClient, make_table: Any) -> None:
    table = make_table(PrimaryKeyColumn("a", STR), PrimaryKeyColumn("b", INT))
    split = table_client.compute_split_points_by_size(table, 1)
    assert split.split_points == ()
    assert split.ranges() == [
        ((("a", INF_MIN), ("b", INF_MIN)), (("a", INF_MAX), ("b", INF_MAX))),
    ]
    assert split.locations == (SplitLocation("", 1),)


def test_split_point_limit(table_client: TableClient, make_table: Any) -> None:
    table = make_table(PrimaryKeyColumn("id", INT))
    keys = [(("id", i),) for i in range(200)]
    _fill(table_client, table, keys, 100)
    assert len(table_client.compute_split_points_by_size(table, 1024).split_points) > 3
    split = table_client.compute_split_points_by_size(table, 1024, split_point_limit=3)
    assert len(split.split_points) == 3 and len(split.ranges()) == 4
    assert _scan(table_client, table, split) == keys


def test_missing_table_is_not_found(table_client: TableClient) -> None:
    with pytest.raises(NotFoundError) as info:
        table_client.compute_split_points_by_size("no_such_table_here", 1024)
    assert (info.value.code, info.value.http_status) == ("OTSObjectNotExist", 404)
    assert info.value.request_id


def test_zero_split_size_is_a_parameter_error_not_retried(
    tablestore_emulator: Any, table_client: TableClient, make_table: Any
) -> None:
    table = make_table(PrimaryKeyColumn("id", INT))
    waits: list[float] = []
    policy = RetryPolicy(max_attempts=5, sleep=waits.append)
    with TableClient(**tablestore_emulator.client_kwargs, retry=policy) as client:
        for size in (0, -5):
            with pytest.raises(InvalidParameterError) as info:
                client.compute_split_points_by_size(table, size)
            assert (info.value.code, info.value.http_status) == ("OTSParameterInvalid", 400)
            assert info.value.request_id
    assert waits == []
    with pytest.raises(TablestoreClientError, match="must be an int"):
        table_client.compute_split_points_by_size(table, 1.5)  # type: ignore[arg-type]


def test_server_errors_are_retried_as_for_reads(
    tablestore_emulator: Any, table_client: TableClient, make_table: Any
) -> None:
    table = make_table(PrimaryKeyColumn("id", INT))
    control = tablestore_emulator.control
    try:
        control.add_fault("/ComputeSplitPointsBySize", "OTSInternalServerError", status=500,
                          message="Internal server error.", count=2)
        assert table_client.compute_split_points_by_size(table, 1024).split_points == ()
        assert control.state()["faults"] == []
    finally:
        control.clear_faults()
        control.close()
