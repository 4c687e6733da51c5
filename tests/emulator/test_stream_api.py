"""The public Stream API on the wire: listing, shards and lineage (split, merge), iterators, records, trimming."""

from __future__ import annotations

from typing import Any

import pytest
from emu_wire import Wire, WireError, create_table, delete, pb, put, unique, update

from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.format import OP_DELETE_ALL
from airflow_tablestore.emulator.testing import EmulatorProcess


def _stream_id(wire: Wire, table: str) -> str:
    streams = wire.call("ListStream", pb.ListStreamRequest(table_name=table)).streams
    assert len(streams) == 1 and streams[0].table_name == table
    return str(streams[0].stream_id)


def _iterator(wire: Wire, sid: str, shard: str, timestamp: int | None = None) -> str:
    req = pb.GetShardIteratorRequest(stream_id=sid, shard_id=shard)
    if timestamp is not None:
        req.timestamp = timestamp
    resp = wire.call("GetShardIterator", req)
    assert not resp.HasField("next_token")
    return str(resp.shard_iterator)


def _drain(wire: Wire, iterator: str, limit: int = 1000) -> tuple[list[Any], str | None]:
    """Read until caught up (empty answer) or the shard ends; returns records and the last iterator."""
    out: list[Any] = []
    it: str | None = iterator
    while it is not None:
        resp = wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=it, limit=limit))
        out.extend(resp.stream_records)
        nxt = resp.next_shard_iterator if resp.HasField("next_shard_iterator") else None
        if not resp.stream_records:
            return out, nxt
        it = nxt
    return out, None


def _seq_ts(record: bytes) -> int:
    """The sequence timestamp (µs) of a record's sequence-info extension."""
    i = record.rindex(b"\x0b\x18\x00\x00\x00\x0c\x13\x00\x00\x00\x0d")
    return int.from_bytes(record[i + 16:i + 24], "little", signed=True)


def _shards(wire: Wire, sid: str) -> list[Any]:
    return list(wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid)).shards)


def test_list_stream(wire: Wire) -> None:
    plain = create_table(wire, unique("plain"))
    streamed = create_table(wire, unique("streamed"), stream_hours=24)
    assert list(wire.call("ListStream", pb.ListStreamRequest(table_name=plain)).streams) == []
    sid = _stream_id(wire, streamed)
    everything = wire.call("ListStream", pb.ListStreamRequest()).streams
    assert sid in {s.stream_id for s in everything} and plain not in {s.table_name for s in everything}
    with pytest.raises(WireError) as err:
        wire.call("ListStream", pb.ListStreamRequest(table_name=unique("missing")))
    assert (err.value.status, err.value.code) == (404, "OTSObjectNotExist")


def test_describe_stream_paging_split_and_merge_lineage(wire: Wire, emulator: EmulatorProcess) -> None:
    table = create_table(wire, unique("lineage"), stream_hours=24)
    sid = _stream_id(wire, table)
    first = _shards(wire, sid)
    assert len(first) == 2 and all(not s.HasField("parent_id") for s in first)
    children = emulator.control.split_partition(table, first[0].shard_id)
    merged = emulator.control.merge_partitions(table, children[0]["partition_id"], children[1]["partition_id"])
    desc = wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid))
    assert desc.stream_status == pb.STREAM_ACTIVE and desc.expiration_time == 24 and desc.table_name == table
    assert not desc.HasField("next_shard_id")
    by_id = {s.shard_id: s for s in desc.shards}
    assert len(by_id) == 5
    for child in children:
        shard = by_id[child["partition_id"]]
        assert shard.parent_id == first[0].shard_id and not shard.HasField("parent_sibling_id")
    m = by_id[merged["partition_id"]]
    assert (m.parent_id, m.parent_sibling_id) == (children[0]["partition_id"], children[1]["partition_id"])
    # pages of two follow next_shard_id and cover every shard once
    seen: list[str] = []
    req = pb.DescribeStreamRequest(stream_id=sid, shard_limit=2)
    while True:
        page = wire.call("DescribeStream", req)
        assert len(page.shards) <= 2
        seen += [s.shard_id for s in page.shards]
        if not page.HasField("next_shard_id"):
            break
        req.inclusive_start_shard_id = page.next_shard_id
    assert seen == [s.shard_id for s in desc.shards]
    for bad in (pb.DescribeStreamRequest(stream_id="no-such-stream"),
                pb.DescribeStreamRequest(stream_id=sid, inclusive_start_shard_id="no-such-shard")):
        with pytest.raises(WireError) as err:
            wire.call("DescribeStream", bad)
        assert (err.value.status, err.value.code) == (404, "OTSObjectNotExist")


def test_records_actions_order_limits_and_closed_shard(wire: Wire, emulator: EmulatorProcess) -> None:
    table = create_table(wire, unique("recs"), stream_hours=24)
    sid = _stream_id(wire, table)
    put(wire, table, [("pk", 1)], {"a": 1})
    update(wire, table, [("pk", 1)], [("a", 2, None, None), ("b", None, OP_DELETE_ALL, None)])
    delete(wire, table, [("pk", 1)])
    shards = _shards(wire, sid)
    records: list[Any] = []
    owner = ""
    for s in shards:
        got, nxt = _drain(wire, _iterator(wire, sid, s.shard_id), limit=1)
        assert nxt is not None  # open shard: always an iterator, even when caught up
        if got:
            owner, records = s.shard_id, got
    assert [r.action_type for r in records] == [pb.PUT_ROW, pb.UPDATE_ROW, pb.DELETE_ROW]
    assert all(decode_row(r.record).pk == [("pk", 1)] for r in records)
    for i in range(2, 12):
        put(wire, table, [("pk", 1)], {"a": i})
    resp = wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=_iterator(wire, sid, owner),
                                                                   limit=4))
    assert len(resp.stream_records) == 4 and resp.may_more_record and resp.consumed.capacity_unit.read >= 1
    for bad_limit in (0, -1):
        with pytest.raises(WireError) as err:
            wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=resp.next_shard_iterator,
                                                                    limit=bad_limit))
        assert err.value.code == "OTSParameterInvalid"
    with pytest.raises(WireError) as err:
        wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator="not an iterator"))
    assert (err.value.status, err.value.code) == (400, "OTSParameterInvalid")
    # closing the shard: the rest is readable, then no next iterator
    emulator.control.split_partition(table, owner)
    rest, nxt = _drain(wire, resp.next_shard_iterator)
    assert len(rest) == 9 and nxt is None


def test_iterator_from_timestamp(wire: Wire) -> None:
    table = create_table(wire, unique("seek"), stream_hours=24)
    sid = _stream_id(wire, table)
    for i in range(12):
        put(wire, table, [("pk", 7)], {"v": i})
    shard = next(s.shard_id for s in _shards(wire, sid) if _drain(wire, _iterator(wire, sid, s.shard_id))[0])
    records, _ = _drain(wire, _iterator(wire, sid, shard))
    stamps = [_seq_ts(r.record) for r in records]
    assert stamps == sorted(stamps) and len(set(stamps)) == 12
    tail, _ = _drain(wire, _iterator(wire, sid, shard, timestamp=stamps[5]))
    assert [_seq_ts(r.record) for r in tail] == stamps[5:]
    future, nxt = _drain(wire, _iterator(wire, sid, shard, timestamp=stamps[-1] + 10_000_000))
    assert future == [] and nxt is not None
    with pytest.raises(WireError) as err:
        _iterator(wire, sid, "no-such-shard")
    assert (err.value.status, err.value.code) == (404, "OTSObjectNotExist")


def test_trimmed_data(wire: Wire, emulator: EmulatorProcess) -> None:
    table = create_table(wire, unique("trim"), stream_hours=24)
    sid = _stream_id(wire, table)
    for i in range(6):
        put(wire, table, [("pk", i)], {"v": i})
    old = {s.shard_id: _iterator(wire, sid, s.shard_id) for s in _shards(wire, sid)}
    caught_up = {k: _drain(wire, it)[1] for k, it in old.items()}
    emulator.control.set_retention(table, 0.001)  # 3.6 s
    emulator.control.advance_time(30)
    put(wire, table, [("pk", 100)], {"v": 100})
    for it in old.values():
        with pytest.raises(WireError) as err:
            wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=it))
        assert (err.value.status, err.value.code) == (404, "OTSTrimmedDataAccess")
        assert "trimmed" in err.value.message
    with pytest.raises(WireError) as err:
        _iterator(wire, sid, next(iter(old)), timestamp=1)
    assert err.value.code == "OTSTrimmedDataAccess"
    fresh = [r for s in _shards(wire, sid) for r in _drain(wire, _iterator(wire, sid, s.shard_id))[0]]
    assert [decode_row(r.record).pk for r in fresh] == [[("pk", 100)]]
    assert all(it is not None for it in caught_up.values())


def test_disabled_and_reenabled_stream(wire: Wire) -> None:
    table = create_table(wire, unique("toggle"), stream_hours=24)
    sid = _stream_id(wire, table)
    put(wire, table, [("pk", 1)], {"v": 1})
    its = [_iterator(wire, sid, s.shard_id) for s in _shards(wire, sid)]
    off = pb.UpdateTableRequest(table_name=table)
    off.stream_spec.enable_stream = False
    wire.call("UpdateTable", off)
    assert list(wire.call("ListStream", pb.ListStreamRequest(table_name=table)).streams) == []
    with pytest.raises(WireError) as err:
        wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid))
    assert err.value.code == "OTSObjectNotExist"
    for it in its:
        with pytest.raises(WireError) as err:
            wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=it))
        assert err.value.code == "OTSTrimmedDataAccess"
    on = pb.UpdateTableRequest(table_name=table)
    on.stream_spec.enable_stream = True
    on.stream_spec.expiration_time = 12
    wire.call("UpdateTable", on)
    new_sid = _stream_id(wire, table)
    assert new_sid != sid
    assert wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=new_sid)).expiration_time == 12
    records = [r for s in _shards(wire, new_sid) for r in _drain(wire, _iterator(wire, new_sid, s.shard_id))[0]]
    assert records == []  # only writes after enabling are captured
    bad = pb.UpdateTableRequest(table_name=table)
    bad.stream_spec.enable_stream = True  # no expiration time
    with pytest.raises(WireError) as err:
        wire.call("UpdateTable", bad)
    assert err.value.code == "OTSParameterInvalid"
