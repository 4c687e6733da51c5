"""TunnelClient against a real emulator process: every RPC, result mapping and error mapping."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_tablestore.client.epoch import to_ns
from airflow_tablestore.client.errors import (
    AlreadyExistsError,
    InvalidParameterError,
    ResourceGoneError,
    SequenceNumberMismatchError,
    StreamNotEnabledError,
    TablestoreClientError,
    TunnelNotFoundError,
)
from airflow_tablestore.client.model import (
    ActionType,
    CellOp,
    ChannelStatus,
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableOptions,
    TableSchema,
    TunnelStage,
    TunnelType,
)
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.reads import FINISHED, is_stream_token
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_tunnel_pb2 as _ots_tunnel_pb2

ots_tunnel_pb2: Any = _ots_tunnel_pb2  # generated module without stubs

_ids = itertools.count()


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "10", "--max-read-records", "4",
                                     "--stream-partitions", "2", "--log-level", "WARNING"]) as e:
        yield e


def _table(tablestore_client: Any, rows: int = 0) -> str:
    name = f"tc{next(_ids)}"
    tablestore_client.create_table(TableSchema(
        name=name, primary_key=(PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
        options=TableOptions(max_versions=3), stream=StreamSpec(enabled=True, expiration_hours=24),
    ))
    for i in range(rows):
        tablestore_client.put_row(name, (("id", i),), [Column("v", f"row{i}")])
    return name


def test_create_describe_list_get_id_delete(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    table = _table(tablestore_client, rows=25)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "t1", TunnelType.BASE_AND_STREAM)
    assert tunnel_id
    desc = tablestore_tunnel_client.describe_tunnel(table, "t1")
    assert desc.tunnel.tunnel_id == tunnel_id
    assert (desc.tunnel.table_name, desc.tunnel.tunnel_name) == (table, "t1")
    assert desc.tunnel.tunnel_type is TunnelType.BASE_AND_STREAM
    assert desc.tunnel.stage in (TunnelStage.INIT, TunnelStage.PROCESS_BASE_DATA)
    assert desc.tunnel.create_time_ns > to_ns(datetime.now(UTC) - timedelta(hours=1))
    created = desc.tunnel.create_time
    assert created is not None and abs(created - datetime.now(UTC)) < timedelta(hours=1)
    base = [c for c in desc.channels if c.channel_type == "BaseData"]
    assert len(base) == 3  # 25 rows, 10 rows per base channel
    assert all(c.status is ChannelStatus.WAIT and c.client_id is None for c in base)
    assert desc.consume_point is None or desc.consume_point.tzinfo is not None

    assert tablestore_tunnel_client.get_tunnel_id(table, "t1") == tunnel_id
    listed = tablestore_tunnel_client.list_tunnels(table)
    assert [t.tunnel_id for t in listed] == [tunnel_id]
    assert tunnel_id in {t.tunnel_id for t in tablestore_tunnel_client.list_tunnels()}

    with pytest.raises(AlreadyExistsError) as exc:
        tablestore_tunnel_client.create_tunnel(table, "t1", TunnelType.STREAM)
    assert exc.value.code == "OTSTunnelExist" and exc.value.request_id

    tablestore_tunnel_client.delete_tunnel(table, "t1")
    assert tablestore_tunnel_client.list_tunnels(table) == []
    with pytest.raises(TunnelNotFoundError) as gone:
        tablestore_tunnel_client.describe_tunnel(table, "t1")
    assert gone.value.code == "OTSParameterInvalid" and gone.value.http_status == 400


def test_stream_tunnel_config_round_trips(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    table = _table(tablestore_client)
    start = datetime.now(UTC) - timedelta(minutes=5)
    end = start + timedelta(hours=1)
    tablestore_tunnel_client.create_tunnel(
        table, "backfill", TunnelType.STREAM, stream_start=start, stream_end=to_ns(end)
    )
    info = tablestore_tunnel_client.describe_tunnel(table, "backfill").tunnel
    assert info.stream_start_ns == to_ns(start)
    assert info.stream_end_ns == to_ns(end)
    with pytest.raises(TablestoreClientError):
        tablestore_tunnel_client.create_tunnel(
            table, "bad", TunnelType.STREAM, stream_start=end, stream_end=start
        )


def test_consume_a_base_tunnel_by_hand(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    table = _table(tablestore_client, rows=25)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "base", TunnelType.BASE_DATA)
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=30, client_tag="unit")
    assert client_id
    channels = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    assert len(channels) == 3
    assert all(isinstance(c, Channel) and c.status is ChannelStatus.OPEN and c.version >= 1 for c in channels)
    desc = tablestore_tunnel_client.describe_tunnel(table, "base")
    assert {c.client_id for c in desc.channels} == {client_id}

    seen: list[int] = []
    for ch in channels:
        token, seq = tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, ch.channel_id)
        assert token != FINISHED and not is_stream_token(token)
        while token != FINISHED:
            result = tablestore_tunnel_client.read_records(tunnel_id, client_id, ch.channel_id, token)
            assert len(result.records) <= 4 and result.size_bytes > 0
            assert list(result.records) == result.records.decode()  # one batch, decoded once on first use
            for rec in result.records:
                assert rec.action is ActionType.PUT_ROW and rec.sequence is None
                assert rec.columns[0].name == "v" and rec.columns[0].timestamp
                seen.append(rec.primary_key[0][1])  # type: ignore[arg-type]
            seq += 1
            tablestore_tunnel_client.checkpoint(tunnel_id, client_id, ch.channel_id, result.next_token, seq)
            token = result.next_token
        assert tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, ch.channel_id) == (FINISHED, seq)
        with pytest.raises(TablestoreClientError):
            tablestore_tunnel_client.read_records(tunnel_id, client_id, ch.channel_id, FINISHED)
    assert sorted(seen) == list(range(25))

    # Report TERMINATED (version + 1); the server stops assigning them.
    after = tablestore_tunnel_client.heartbeat(tunnel_id, client_id,
                         [Channel(c.channel_id, c.version + 1, ChannelStatus.TERMINATED) for c in channels])
    assert after == []
    statuses = {c.status for c in tablestore_tunnel_client.describe_tunnel(table, "base").channels}
    assert statuses <= {ChannelStatus.TERMINATED}

    tablestore_tunnel_client.shutdown(tunnel_id, client_id)
    with pytest.raises(ResourceGoneError) as gone:
        tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    assert gone.value.http_status == 410


def test_checkpoint_sequence_mismatch_and_stream_reads(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    table = _table(tablestore_client)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "s", TunnelType.STREAM)
    for i in range(6):
        tablestore_client.put_row(table, (("id", i),), [Column("v", i * 1.5)])
    tablestore_client.update_row(table, (("id", 0),), [Column("v", op=CellOp.DELETE_ALL_VERSIONS)])
    tablestore_client.delete_row(table, (("id", 1),))
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=30)
    channels = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    assert len(channels) == 2 and all(c.status is ChannelStatus.OPEN for c in channels)
    records = []
    for ch in channels:
        token, seq = tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, ch.channel_id)
        assert is_stream_token(token)
        for _ in range(10):
            result = tablestore_tunnel_client.read_records(tunnel_id, client_id, ch.channel_id, token)
            assert is_stream_token(result.next_token)
            records.extend(result.records)
            token = result.next_token
            if not result.records:
                break
        tablestore_tunnel_client.checkpoint(tunnel_id, client_id, ch.channel_id, token, seq + 1)
        with pytest.raises(SequenceNumberMismatchError) as stale:
            tablestore_tunnel_client.checkpoint(tunnel_id, client_id, ch.channel_id, token, seq + 1)
        assert stale.value.code == "OTSSequenceNumberNotMatch"
        assert tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, ch.channel_id) == (
            token,
            seq + 1,
        )
    actions = sorted(r.action for r in records)
    assert actions.count(ActionType.PUT_ROW) == 6
    assert ActionType.UPDATE_ROW in actions and ActionType.DELETE_ROW in actions
    assert all(r.sequence is not None and r.sequence.timestamp > 0 for r in records)
    desc = tablestore_tunnel_client.describe_tunnel(table, "s")
    assert desc.tunnel.stage is TunnelStage.PROCESS_STREAM
    assert all(c.consume_point_ns > 0 for c in desc.channels)
    assert desc.consume_point is not None


def test_schedule_suspends_a_channel(tablestore_tunnel_client: TunnelClient, tablestore_client: Any) -> None:
    table = _table(tablestore_client)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "sched", TunnelType.STREAM)
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=30)
    channels = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    target = channels[0]
    tablestore_tunnel_client.schedule(tunnel_id, [Channel(target.channel_id, 0, ChannelStatus.CLOSING)])
    again = {c.channel_id: c for c in tablestore_tunnel_client.heartbeat(tunnel_id, client_id, channels)}
    assert again[target.channel_id].status is ChannelStatus.CLOSING
    assert again[target.channel_id].version > target.version


def test_errors_for_unknown_tunnel_and_client(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    with pytest.raises(TunnelNotFoundError):
        tablestore_tunnel_client.connect("no-such-tunnel")
    table = _table(tablestore_client)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "x", TunnelType.STREAM)
    with pytest.raises(ResourceGoneError):
        tablestore_tunnel_client.heartbeat(tunnel_id, "never-connected", [])
    with pytest.raises(TunnelNotFoundError):
        tablestore_tunnel_client.delete_tunnel(table, "nope")


def test_a_tunnel_on_a_table_without_a_stream_names_the_fix(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any
) -> None:
    name = f"tc{next(_ids)}"
    tablestore_client.create_table(TableSchema(name, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    for kind in (TunnelType.BASE_AND_STREAM, TunnelType.STREAM):
        with pytest.raises(StreamNotEnabledError) as err:
            tablestore_tunnel_client.create_tunnel(name, "copy", kind)
        first = str(err.value).splitlines()[0]
        assert first.startswith(f"OTSParameterInvalid: table {name!r} has no stream, and a {kind.value} tunnel")
        assert f"TableClient.update_table({name!r}, stream=StreamSpec(enabled=True))" in first
        assert "TablestoreCreateTunnelOperator(..., enable_stream=True)" in first
        assert err.value.request_id  # the service's answer, kept
    assert tablestore_tunnel_client.create_tunnel(name, "base", TunnelType.BASE_DATA)  # base data needs no stream
    tablestore_client.update_table(name, stream=StreamSpec(enabled=True))  # the one step the message names
    assert tablestore_tunnel_client.create_tunnel(name, "copy", TunnelType.BASE_AND_STREAM)
    with pytest.raises(InvalidParameterError, match="'no_such_table'") as missing:  # not a stream problem
        tablestore_tunnel_client.create_tunnel("no_such_table", "copy")
    assert not isinstance(missing.value, StreamNotEnabledError)


def test_helpers_and_constructor_validation() -> None:
    assert to_ns(datetime(2024, 1, 1, tzinfo=UTC)) == 1_704_067_200_000_000_000
    assert to_ns(datetime(2024, 1, 1)) == 1_704_067_200_000_000_000  # naive = UTC
    assert to_ns(5) == 5 and to_ns(None) == 0
    with pytest.raises(TablestoreClientError):
        to_ns(-1)
    stream_token = ots_tunnel_pb2.Token(
        version=2, content=ots_tunnel_pb2.TokenContentV2(iterator="it").SerializeToString())
    assert is_stream_token(base64.b64encode(stream_token.SerializeToString()).decode())
    assert not is_stream_token("not base64 !!") and not is_stream_token(FINISHED)
    with pytest.raises(TablestoreClientError):
        TunnelClient(endpoint="http://127.0.0.1:1")
    secret = "super-secret-value"
    client = TunnelClient("http://127.0.0.1:1", "id", secret, "inst")
    assert secret not in repr(client)


def test_decode_records_maps_actions_sequence_and_origin_columns() -> None:
    from airflow_tablestore.client.model import Row, SequenceInfo
    from airflow_tablestore.client.plainbuffer.encode import encode_row
    from airflow_tablestore.client.records import decode_record_message, decode_records

    pk = (("id", 7),)
    seq = SequenceInfo(0, 1_700_000_000_000_123, 2)
    update = Row(
        pk,
        (Column("a", "x", 1_700_000_000_000), Column("b", None, None, CellOp.DELETE_ALL_VERSIONS)),
        sequence=seq,
    )
    origin = Row(pk, (Column("a", "old", 1_600_000_000_000),))
    msgs = [
        ots_tunnel_pb2.Record(action_type=ots_tunnel_pb2.UPDATE_ROW, record=encode_row(update),
                              origin_record=encode_row(origin)),
        ots_tunnel_pb2.Record(action_type=ots_tunnel_pb2.DELETE_ROW,
                              record=encode_row(Row(pk, (), delete_marker=True, sequence=seq))),
    ]
    upd, dele = decode_records(msgs)
    assert upd.action is ActionType.UPDATE_ROW and upd.primary_key == pk and upd.sequence == seq
    assert upd.columns == update.columns
    assert upd.origin_columns == origin.columns
    assert dele.action is ActionType.DELETE_ROW and dele.columns == () and dele.origin_columns is None
    # readable where a user prints it; the number stays the wire's
    assert (str(upd.action), f"{dele.action}", f"{dele.action:>12}") == ("UPDATE_ROW", "DELETE_ROW", "  DELETE_ROW")
    assert upd.action == 2 and int(dele.action) == 3
    assert decode_record_message(msgs[1]) == dele
    bad = ots_tunnel_pb2.Record(action_type=ots_tunnel_pb2.PUT_ROW, record=b"\x75\x00\x00\x00\x01")
    with pytest.raises(TablestoreClientError):
        decode_records([bad])


def test_idempotent_calls_are_retried_and_state_changes_are_not(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, tablestore_emulator: EmulatorProcess
) -> None:
    from airflow_tablestore.client.errors import ServerError

    table = _table(tablestore_client, rows=3)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "retry", TunnelType.BASE_DATA)
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=30)
    (channel,) = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    tablestore_emulator.control.add_fault(
        "/tunnel/readrecords", "OTSTunnelServerUnavailable", status=503, count=2
    )
    tablestore_emulator.control.add_fault("/tunnel/describe", "OTSInternalServerError", status=500, count=1)
    token, seq = tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, channel.channel_id)
    result = tablestore_tunnel_client.read_records(
        tunnel_id, client_id, channel.channel_id, token
    )  # two 503s, then success
    assert len(result.records) == 3
    assert tablestore_tunnel_client.describe_tunnel(table, "retry").tunnel.tunnel_id == tunnel_id
    assert (
        tablestore_emulator.control.state()["faults"] == []
    )  # every injected failure was hit, and retried through
    # A state change is not retried on a server error: the first attempt may have been applied.
    tablestore_emulator.control.add_fault("/tunnel/checkpoint", "OTSInternalServerError", status=500, count=1)
    with pytest.raises(ServerError) as exc:
        tablestore_tunnel_client.checkpoint(
            tunnel_id, client_id, channel.channel_id, result.next_token, seq + 1
        )
    assert exc.value.code == "OTSInternalServerError" and exc.value.http_status == 500
    tablestore_tunnel_client.checkpoint(
        tunnel_id, client_id, channel.channel_id, result.next_token, seq + 1
    )  # fault consumed
    assert tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, channel.channel_id) == (
        result.next_token,
        seq + 1,
    )
