"""CreateTable / DescribeTable / ListTable / UpdateTable / DeleteTable over real HTTP."""

from __future__ import annotations

import pytest
from emu_wire import Wire, WireError, create_table, pb, put, unique


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
