"""``StreamClient`` against the emulator: typed results, pagination, records with sequence info, typed
errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.client import TableClient
from airflow_tablestore.client.errors import (
    InvalidParameterError,
    NotFoundError,
    TablestoreClientError,
    TrimmedDataError,
)
from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ActionType,
    CellOp,
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    StreamSpec,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.stream.client import StreamClient, StreamRecordsResult, StreamStatus
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb


def _schema(name: str, stream: bool = True) -> TableSchema:
    return TableSchema(name, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                       stream=StreamSpec(True, 24) if stream else None)


@pytest.fixture()
def stream_client(table_client: TableClient) -> StreamClient:
    return StreamClient(transport=table_client.transport)


def _read_all(client: StreamClient, stream_id: str, shard_id: str) -> list[Any]:
    out: list[Any] = []
    it: str | None = client.get_shard_iterator(stream_id, shard_id)
    while it is not None:
        result = client.get_stream_records(it, limit=2)
        assert isinstance(result, StreamRecordsResult)
        out.extend(result.records)
        if not result.records:
            break
        it = result.next_iterator
    return out


def test_list_describe_and_records(
    table_client: TableClient, stream_client: StreamClient, tablestore_emulator: Any, unique_name: str
) -> None:
    table_client.create_table(_schema(unique_name))
    table_client.create_table(_schema(unique_name + "_plain", stream=False))
    assert stream_client.stream_id_of(unique_name + "_plain") is None
    streams = stream_client.list_streams(unique_name)
    assert len(streams) == 1 and streams[0].table_name == unique_name and streams[0].creation_time_us > 0
    sid = streams[0].stream_id
    assert sid in {s.stream_id for s in stream_client.list_streams()}
    table_client.put_row(unique_name, [("id", 1)], {"a": "x", "n": 1})
    table_client.update_row(unique_name, [("id", 1)],
                            [Column("a", "y"), Column("n", None, op=CellOp.DELETE_ALL_VERSIONS)])
    table_client.delete_row(unique_name, [("id", 1)])
    before = stream_client.describe_stream(sid).shards
    tablestore_emulator.control.split_partition(unique_name, before[0].shard_id)
    desc = stream_client.describe_stream(sid, shard_limit=1)  # one shard per page: follows next_shard_id
    assert (
        desc.status is StreamStatus.ACTIVE and desc.table_name == unique_name and desc.expiration_hours == 24
    )
    assert desc.shards[:len(before)] == before and len(desc.shards) == len(before) + 2
    parent = desc.shards[0]
    assert [s.parent_ids for s in desc.shards[len(before):]] == [(parent.shard_id,), (parent.shard_id,)]
    assert all(s.parent_ids == () for s in before)
    assert desc.shard(parent.shard_id) == parent and desc.shard("nope") is None
    records = [r for s in desc.shards for r in _read_all(stream_client, sid, s.shard_id)]
    assert [r.action for r in records] == [ActionType.PUT_ROW, ActionType.UPDATE_ROW, ActionType.DELETE_ROW]
    assert all(r.primary_key == (("id", 1),) and r.sequence is not None for r in records)
    put, upd, _ = records
    assert {c.name: c.value for c in put.columns} == {"a": "x", "n": 1}
    assert [(c.name, c.op) for c in upd.columns] == [("a", CellOp.PUT), ("n", CellOp.DELETE_ALL_VERSIONS)]
    stamps = [r.sequence.timestamp for r in records if r.sequence]
    assert stamps == sorted(stamps)
    # from a timestamp: the first record at or after it
    owner = next(s.shard_id for s in desc.shards if _read_all(stream_client, sid, s.shard_id))
    it = stream_client.get_shard_iterator(sid, owner, timestamp_us=stamps[1])
    assert [r.action for r in stream_client.get_stream_records(it).records] == [ActionType.UPDATE_ROW,
                                                                                 ActionType.DELETE_ROW]
    # the closed parent ends: no next iterator once drained
    last = stream_client.get_stream_records(
        stream_client.get_shard_iterator(sid, parent.shard_id), limit=1000
    )
    assert last.next_iterator is None


def test_errors_are_typed(table_client: TableClient, stream_client: StreamClient, tablestore_emulator: Any,
                          unique_name: str) -> None:
    with pytest.raises(NotFoundError) as err:
        stream_client.describe_stream("no-such-stream")
    assert err.value.code == "OTSObjectNotExist" and err.value.request_id
    with pytest.raises(NotFoundError):
        stream_client.list_streams(unique_name + "_missing")
    table_client.create_table(_schema(unique_name))
    sid = stream_client.stream_id_of(unique_name)
    assert sid is not None
    shard = stream_client.describe_stream(sid).shards[0].shard_id
    with pytest.raises(NotFoundError):
        stream_client.get_shard_iterator(sid, "no-such-shard")
    with pytest.raises(InvalidParameterError):
        stream_client.get_stream_records("garbage")
    with pytest.raises(TablestoreClientError):
        stream_client.get_stream_records("")
    with pytest.raises(TablestoreClientError):
        stream_client.get_stream_records("x", limit=0)
    with pytest.raises(TablestoreClientError):
        stream_client.get_shard_iterator(sid, shard, timestamp_us=-1)
    it = stream_client.get_shard_iterator(sid, shard)
    table_client.update_table(unique_name, stream=StreamSpec(False))
    with pytest.raises(TrimmedDataError) as trimmed:
        stream_client.get_stream_records(it)
    assert trimmed.value.code == "OTSTrimmedDataAccess" and "trimmed" in str(trimmed.value)


def test_shard_iterator_follows_next_token(scripted: Any) -> None:
    first = pb.GetShardIteratorResponse(shard_iterator="partial", next_token="tok-1").SerializeToString()
    final = pb.GetShardIteratorResponse(shard_iterator="positioned").SerializeToString()
    scripted.script(scripted.Reply(body=first), scripted.Reply(body=final))
    client = StreamClient(scripted.endpoint, "akid", "secret-value", "inst")
    assert client.get_shard_iterator("s", "sh", timestamp_us=5) == "positioned"
    second = pb.GetShardIteratorRequest.FromString(scripted.requests[1].body)
    assert (second.token, second.timestamp) == ("tok-1", 5)
    assert "secret-value" not in repr(client)
    client.close()


def test_enabling_the_stream_of_a_loaded_table_opens_the_emulators_partitions(tmp_path: Path) -> None:
    """A table loaded with its stream off, served again with more stream partitions: enabling its stream
    (UpdateTable) opens that many shards, the rows stay, and only writes after it are in the stream (what the
    scale benchmarks' cached data relies on)."""
    with EmulatorProcess(data_dir=tmp_path, extra_args=["--stream-partitions", "2"]) as emu, \
            TableClient(**emu.client_kwargs) as tables:
        tables.create_table(_schema("loaded", stream=False))
        tables.write_rows(RowWrite("loaded", WriteType.PUT, (("id", i),), (Column("v", i),)) for i in range(50))
    with EmulatorProcess(data_dir=tmp_path, extra_args=["--stream-partitions", "5"]) as emu, \
            TableClient(**emu.client_kwargs) as tables:
        streams = StreamClient(transport=tables.transport)
        assert streams.stream_id_of("loaded") is None
        tables.update_table("loaded", stream=StreamSpec(True, 24))
        stream_id = streams.stream_id_of("loaded")
        assert stream_id is not None
        shards = streams.describe_stream(stream_id).shards
        assert len(shards) == 5
        assert len(list(tables.iter_range("loaded", [("id", INF_MIN)], [("id", INF_MAX)]))) == 50
        tables.write_rows([RowWrite("loaded", WriteType.UPDATE, (("id", 7),), (Column("v", -7),))])
        records = [r for s in shards
                   for r in streams.get_stream_records(streams.get_shard_iterator(stream_id, s.shard_id)).records]
        assert [r.primary_key for r in records] == [(("id", 7),)]
