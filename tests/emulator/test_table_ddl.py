"""CreateTable / DescribeTable / ListTable / UpdateTable / DeleteTable over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from emu_wire import Wire, WireError, create_table, pb, put, unique

from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.encode import encode_row


def test_create_describe_list_delete(wire: Wire) -> None:
    name = create_table(wire, unique("ddl"), [("a", 2), ("b", 1), ("c", 3)], max_versions=3, ttl=86400 * 2)
    desc = wire.call("DescribeTable", pb.DescribeTableRequest(table_name=name))
    assert [(p.name, p.type) for p in desc.table_meta.primary_key] == [("a", 2), ("b", 1), ("c", 3)]
    o = desc.table_options
    assert (o.time_to_live, o.max_versions, o.deviation_cell_version_in_sec, o.allow_update) == (172800, 3, 86400, True)
    assert desc.table_status == pb.ACTIVE
    assert desc.reserved_throughput_details.capacity_unit.HasField("read")
    assert desc.reserved_throughput_details.capacity_unit.HasField("write")
    assert desc.stream_details.enable_stream is False
    assert name in wire.call("ListTable", b"").table_names
    wire.call("DeleteTable", pb.DeleteTableRequest(table_name=name))
    assert name not in wire.call("ListTable", b"").table_names
    with pytest.raises(WireError) as e:
        wire.call("DescribeTable", pb.DescribeTableRequest(table_name=name))
    assert (e.value.status, e.value.code, e.value.message) == (
        404, "OTSObjectNotExist", "Requested table does not exist.")


def test_duplicate_table_is_409(wire: Wire, table: str) -> None:
    with pytest.raises(WireError) as e:
        create_table(wire, table)
    assert (e.value.status, e.value.code) == (409, "OTSObjectAlreadyExist")


@pytest.mark.parametrize(("name", "pk", "message"), [
    ("1bad", [("pk", 1)], "Invalid table name: '1bad'."),
    ("ok_name", [("bad-col", 1)], "Invalid column name: 'bad-col'."),
    ("ok_name", [("pk", 5)], "BOOLEAN is an invalid type for the primary key."),
    ("ok_name", [("pk", 1), ("pk", 2)], "Duplicated primary key name: 'pk'."),
    ("ok_name", [("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1)],
     "The number of primary key columns must be in range: [1, 4]."),
])
def test_invalid_schemas(wire: Wire, name: str, pk: list, message: str) -> None:
    with pytest.raises(WireError) as e:
        create_table(wire, name, pk)
    assert (e.value.status, e.value.code, e.value.message) == (400, "OTSParameterInvalid", message)


def test_invalid_options(wire: Wire) -> None:
    with pytest.raises(WireError, match="TimeToLive cannot be 0"):
        create_table(wire, unique("o"), ttl=0)
    with pytest.raises(WireError, match="maximum versions"):
        create_table(wire, unique("o"), max_versions=0)
    req = pb.CreateTableRequest()
    req.table_meta.table_name = unique("o")
    req.table_meta.primary_key.add(name="pk", type=1)
    req.reserved_throughput.capacity_unit.read = 0
    req.table_options.max_versions = 1
    with pytest.raises(WireError, match="Time-to-live is missing"):
        wire.call("CreateTable", req)


def test_update_table_merges_options_and_stream(wire: Wire, table: str) -> None:
    req = pb.UpdateTableRequest(table_name=table)
    req.table_options.max_versions = 5
    resp = wire.call("UpdateTable", req)
    assert (resp.table_options.max_versions, resp.table_options.time_to_live) == (5, -1)
    req = pb.UpdateTableRequest(table_name=table)
    req.stream_spec.enable_stream = True
    req.stream_spec.expiration_time = 12
    resp = wire.call("UpdateTable", req)
    assert resp.stream_details.enable_stream and resp.stream_details.expiration_time == 12
    first_id = resp.stream_details.stream_id
    assert first_id
    req = pb.UpdateTableRequest(table_name=table)
    req.stream_spec.enable_stream = False
    assert not wire.call("UpdateTable", req).stream_details.enable_stream
    req = pb.UpdateTableRequest(table_name=table)
    req.stream_spec.enable_stream = True
    req.stream_spec.expiration_time = 12
    assert wire.call("UpdateTable", req).stream_details.stream_id != first_id
    empty = pb.UpdateTableRequest(table_name=table)
    empty.table_options.SetInParent()
    with pytest.raises(WireError, match="No parameter is specified in table options."):
        wire.call("UpdateTable", empty)


def test_delete_table_drops_rows(wire: Wire) -> None:
    name = create_table(wire, unique("d"))
    put(wire, name, [("pk", 1)], {"c": 1})
    wire.call("DeleteTable", pb.DeleteTableRequest(table_name=name))
    create_table(wire, name)
    req = pb.GetRowRequest(table_name=name, max_versions=1)
    from airflow_tablestore.emulator.codec.encode import encode_primary_key

    req.primary_key = encode_primary_key([("pk", 1)])
    assert wire.call("GetRow", req).row == b""


def test_compute_split_points(wire: Wire, table: str) -> None:
    resp = wire.call("ComputeSplitPointsBySize",
                     pb.ComputeSplitPointsBySizeRequest(table_name=table, split_size=1))
    assert [s.name for s in resp.schema] == ["pk"]
    assert sum(loc.repeat for loc in resp.locations) == len(resp.split_points) + 1


def _split(wire: Wire, table: str, split_size: int, unit: int | None = None, limit: int | None = None) -> Any:
    req = pb.ComputeSplitPointsBySizeRequest(table_name=table, split_size=split_size)
    if unit is not None:
        req.split_size_unit_in_byte = unit
    if limit is not None:
        req.split_point_limit = limit
    return wire.call("ComputeSplitPointsBySize", req)


def _fill(wire: Wire, table: str, pks: list[list[tuple[str, Any]]], payload: int) -> None:
    for start in range(0, len(pks), 100):
        req = pb.BatchWriteRowRequest()
        item = req.tables.add(table_name=table)
        for pk in pks[start:start + 100]:
            row = item.rows.add(type=pb.PUT, row_change=encode_row(pk, [("v", "x" * payload, None, None)]))
            row.condition.row_existence = pb.IGNORE
        assert all(r.is_ok for r in wire.call("BatchWriteRow", req).tables[0].rows)


def test_split_points_are_first_column_prefixes(wire: Wire) -> None:
    # BINARY first column holding 00 bytes (escaped in the store's keys), 10 rows per first value
    table = create_table(wire, unique("split"), [("a", 3), ("b", 1)])
    _fill(wire, table, [[("a", b"\x00\x01" + bytes([i // 10])), ("b", i)] for i in range(200)], 300)
    resp = _split(wire, table, 4, unit=1024)
    assert [(s.name, s.type) for s in resp.schema] == [("a", 3), ("b", 1)]
    points = [decode_row(raw) for raw in resp.split_points]
    assert all(len(p.pk) == 1 and p.pk[0][0] == "a" and not p.cells for p in points)
    values: list[Any] = [p.pk[0][1] for p in points]
    assert len(values) >= 8 and values == sorted(set(values)) and values[0] != b"\x00\x01\x00"
    assert [(loc.location, loc.repeat) for loc in resp.locations] == [("", len(values) + 1)]
    # repeat is a sint64: zigzag, so N+1 is sent as the varint 2(N+1)
    raw = resp.locations[0].SerializeToString()
    assert raw[-1] == 2 * (len(values) + 1)
    assert len(_split(wire, table, 4, unit=1024, limit=3).split_points) == 3
    assert _split(wire, table, 1).split_points == []  # default unit 100 MB


def test_one_first_value_never_splits(wire: Wire) -> None:
    table = create_table(wire, unique("split"), [("a", 2), ("b", 1)])
    _fill(wire, table, [[("a", "only"), ("b", i)] for i in range(50)], 100)
    assert _split(wire, table, 1, unit=1).split_points == []
    empty = create_table(wire, unique("split"), [("a", 2)])
    resp = _split(wire, empty, 1, unit=1)
    assert resp.split_points == [] and [loc.repeat for loc in resp.locations] == [1]


@pytest.mark.parametrize(("size", "unit", "limit", "message"), [
    (0, None, None, "Split size must be greater than 0."),
    (-1, 1, None, "Split size must be greater than 0."),
    (1, 0, None, "Split size unit must be greater than 0."),
    (1, 1, 0, "Split point limit must be greater than 0."),
])
def test_split_point_parameters(wire: Wire, table: str, size: int, unit: int | None, limit: int | None,
                                message: str) -> None:
    with pytest.raises(WireError) as e:
        _split(wire, table, size, unit, limit)
    assert (e.value.status, e.value.code, e.value.message) == (400, "OTSParameterInvalid", message)


def test_split_points_of_a_missing_table(wire: Wire) -> None:
    with pytest.raises(WireError) as e:
        _split(wire, unique("gone"), 1)
    assert (e.value.status, e.value.code) == (404, "OTSObjectNotExist")


def test_stream_spec_validation(wire: Wire) -> None:
    name = unique("ret")
    req = pb.CreateTableRequest()
    req.table_meta.table_name = name
    req.table_meta.primary_key.add(name="pk", type=1)
    req.reserved_throughput.capacity_unit.read = 0
    req.table_options.time_to_live = -1
    req.table_options.max_versions = 1
    req.stream_spec.enable_stream = True
    with pytest.raises(WireError, match="Expiration time of stream must be specified"):
        wire.call("CreateTable", req)
    req.stream_spec.expiration_time = 169  # above --stream-retention-hours (168)
    with pytest.raises(WireError, match=r"\[1, 168\]"):
        wire.call("CreateTable", req)
    req.stream_spec.expiration_time = 168
    wire.call("CreateTable", req)
    desc = wire.call("DescribeTable", pb.DescribeTableRequest(table_name=name))
    assert desc.stream_details.enable_stream and desc.stream_details.expiration_time == 168
