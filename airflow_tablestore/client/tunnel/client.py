"""``TunnelClient``: the Tablestore Tunnel Service RPCs (``POST /tunnel/<op>``) as typed Python calls.

One method per RPC, nothing stateful: the per-channel state machine lives in :mod:`.worker`; what a
ReadRecords answer means (end token, "enough data", stream tokens) is :mod:`.reads`. Times on the wire
are nanoseconds (``create_time``, consume points, stream offsets); the client accepts ``datetime`` or raw ns.
Errors are the typed exceptions of :mod:`airflow_tablestore.client.errors` raised by the transport
(``OTSTunnelExist`` → :class:`AlreadyExistsError`, "tunnel not exist" → :class:`TunnelNotFoundError`,
``OTSResourceGone`` → :class:`ResourceGoneError`, ...). Reads (list/describe/readrecords/getcheckpoint),
Heartbeat (it reports states with versions: sending the same report twice changes nothing) and Shutdown are
retried by the transport on 5xx/network errors; Create, Delete, Connect (a retry would register a second
client), Checkpoint (the sequence number decides; callers re-read it) and Schedule are not.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from airflow_tablestore.client import epoch
from airflow_tablestore.client.base_client import BaseClient
from airflow_tablestore.client.errors import (
    InvalidParameterError,
    StreamNotEnabledError,
    TablestoreClientError,
    TablestoreError,
)
from airflow_tablestore.client.model import (
    ChannelInfo,
    ChannelStatus,
    TunnelDescription,
    TunnelInfo,
    TunnelStage,
    TunnelType,
)
from airflow_tablestore.client.records import Records, split_read_records
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.transport import RawResponse
from airflow_tablestore.client.tunnel.reads import FINISHED, ReadResult
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

_STATUS_TO_WIRE = {
    ChannelStatus.OPEN: tunnel_pb2.OPEN,
    ChannelStatus.CLOSING: tunnel_pb2.CLOSING,
    ChannelStatus.CLOSE: tunnel_pb2.CLOSE,
    ChannelStatus.TERMINATED: tunnel_pb2.TERMINATED,
}
_STATUS_FROM_WIRE = {v: k for k, v in _STATUS_TO_WIRE.items()}
_TYPE_TO_WIRE = {
    TunnelType.BASE_DATA: tunnel_pb2.BaseData,
    TunnelType.STREAM: tunnel_pb2.Stream,
    TunnelType.BASE_AND_STREAM: tunnel_pb2.BaseAndStream,
}


class Channel(NamedTuple):
    """A channel as exchanged in heartbeats: id, logical version and status.

    Why its own type: it is the unit of the heartbeat protocol (client and server report these triples);
    :class:`~airflow_tablestore.client.model.ChannelInfo` is the richer, read-only DescribeTunnel view.
    """

    channel_id: str
    version: int
    status: ChannelStatus


def _enum(cls: Any, value: str, what: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise TablestoreClientError(f"the service returned an unknown {what} {value!r}") from None


def _tunnel_info(msg: Any) -> TunnelInfo:
    cfg = msg.stream_tunnel_config if msg.HasField("stream_tunnel_config") else None
    return TunnelInfo(
        tunnel_id=msg.tunnel_id,
        tunnel_name=msg.tunnel_name,
        table_name=msg.table_name,
        instance_name=msg.instance_name,
        tunnel_type=_enum(TunnelType, msg.tunnel_type, "tunnel type"),
        stage=_enum(TunnelStage, msg.stage, "tunnel stage"),
        stream_id=msg.stream_id,
        expired=msg.expired,
        create_time_ns=msg.create_time,
        stream_start_ns=(cfg.startOffset or None) if cfg is not None else None,
        stream_end_ns=(cfg.endOffset or None) if cfg is not None else None,
    )


def _channel_info(msg: Any) -> ChannelInfo:
    return ChannelInfo(
        channel_id=msg.channel_id,
        channel_type=msg.channel_type,
        status=_enum(ChannelStatus, msg.channel_status, "channel status") if msg.channel_status
        else ChannelStatus.WAIT,
        client_id=msg.client_id or None,
        consume_point_ns=msg.channel_rpo,
        row_count=msg.channel_count,
    )


_READ_PATH = "/tunnel/readrecords"


def _may_more(resp: Any) -> bool | None:
    return bool(resp.may_more_record) if resp.HasField("may_more_record") else None


def _wire_channels(channels: Iterable[Channel], target: Any) -> None:
    for ch in channels:
        item = target.add()
        item.channel_id = ch.channel_id
        item.version = ch.version
        item.status = _STATUS_TO_WIRE[ChannelStatus(ch.status)]


class TunnelClient(BaseClient):
    """Tunnel Service client. Build it like ``TableClient`` or from an existing ``transport``."""

    # -- plumbing -----------------------------------------------------------------------------------
    def _call(self, op: str, request: Any, response_cls: Any, *, idempotent: bool) -> Any:
        return self._transport.call(f"/tunnel/{op}", request, response_cls, idempotent=idempotent)

    # -- tunnel management --------------------------------------------------------------------------
    def create_tunnel(
        self,
        table: str,
        name: str,
        tunnel_type: TunnelType | str = TunnelType.BASE_AND_STREAM,
        *,
        stream_start: datetime | int | None = None,
        stream_end: datetime | int | None = None,
        earliest: bool = False,
    ) -> str:
        """Create a tunnel and return its id. ``stream_start``/``stream_end`` bound the stream part
        (a Stream tunnel with an end is a backfill tunnel); ``earliest`` starts from the oldest retained log.
        Raises :class:`AlreadyExistsError` when the name is taken for the table, and
        :class:`StreamNotEnabledError` (naming the call that enables it) when a Stream or BaseAndStream tunnel
        is asked for on a table whose stream is off."""
        tunnel_type = TunnelType(tunnel_type)
        start_ns, end_ns = epoch.to_ns(stream_start), epoch.to_ns(stream_end)
        if start_ns and earliest:
            raise TablestoreClientError("give either stream_start or earliest=True, not both")
        if end_ns and start_ns and end_ns <= start_ns:
            raise TablestoreClientError("stream_end must be after stream_start")
        req = tunnel_pb2.CreateTunnelRequest()
        req.tunnel.table_name = table
        req.tunnel.tunnel_name = name
        req.tunnel.tunnel_type = _TYPE_TO_WIRE[tunnel_type]
        if tunnel_type != TunnelType.BASE_DATA and (start_ns or end_ns or earliest):
            cfg = req.tunnel.stream_tunnel_config
            if start_ns:
                cfg.startOffset = start_ns
            else:
                cfg.flag = tunnel_pb2.EARLIEST if earliest else tunnel_pb2.LATEST
            if end_ns:
                cfg.endOffset = end_ns
        try:
            resp = self._call("create", req, tunnel_pb2.CreateTunnelResponse, idempotent=False)
        except InvalidParameterError as exc:
            if tunnel_type != TunnelType.BASE_DATA and self._stream_off(table):
                raise StreamNotEnabledError(
                    exc.code,
                    f"table {table!r} has no stream, and a {tunnel_type.value} tunnel reads it: enable it with "
                    f"TableClient.update_table({table!r}, stream=StreamSpec(enabled=True)) (or create the table "
                    "with stream=StreamSpec(enabled=True)); in a DAG, TablestoreCreateTunnelOperator(..., "
                    f"enable_stream=True) does it. The service said: {exc.message}",
                    exc.http_status, exc.request_id) from None
            raise
        return str(resp.tunnel_id)

    def _stream_off(self, table: str) -> bool:
        """Whether ``table`` exists with its stream off (DescribeTable; False when that cannot be told)."""
        try:
            return not TableClient(transport=self._transport).describe_table(table).stream.enabled
        except TablestoreError:
            return False

    def list_tunnels(self, table: str | None = None) -> list[TunnelInfo]:
        """Tunnels of ``table``, or of the whole instance when ``table`` is None."""
        req = tunnel_pb2.ListTunnelRequest()
        if table:
            req.table_name = table
        resp = self._call("list", req, tunnel_pb2.ListTunnelResponse, idempotent=True)
        return [_tunnel_info(t) for t in resp.tunnels]

    def describe_tunnel(self, table: str, name: str) -> TunnelDescription:
        """Tunnel info, its channels (status, owner, consume point) and the tunnel consume point."""
        req = tunnel_pb2.DescribeTunnelRequest(table_name=table, tunnel_name=name)
        resp = self._call("describe", req, tunnel_pb2.DescribeTunnelResponse, idempotent=True)
        return TunnelDescription(
            tunnel=_tunnel_info(resp.tunnel),
            channels=tuple(_channel_info(c) for c in resp.channels),
            consume_point_ns=resp.tunnel_rpo,
        )

    def get_tunnel_id(self, table: str, name: str) -> str:
        """The id of tunnel ``name`` on ``table`` (raises :class:`TunnelNotFoundError` if absent)."""
        return self.describe_tunnel(table, name).tunnel.tunnel_id

    def delete_tunnel(self, table: str, name: str) -> None:
        """Delete a tunnel and its checkpoints."""
        req = tunnel_pb2.DeleteTunnelRequest(table_name=table, tunnel_name=name)
        self._call("delete", req, tunnel_pb2.DeleteTunnelResponse, idempotent=False)

    # -- consumption protocol -----------------------------------------------------------------------
    def connect(self, tunnel_id: str, *, timeout_s: int = 300, client_tag: str | None = None) -> str:
        """Register a consumer; returns its client id. ``timeout_s`` is the server-side heartbeat timeout."""
        if timeout_s <= 0:
            raise TablestoreClientError("timeout_s must be positive")
        req = tunnel_pb2.ConnectRequest(tunnel_id=tunnel_id)
        req.client_config.timeout = int(timeout_s)
        if client_tag:
            req.client_config.client_tag = client_tag
        resp = self._call("connect", req, tunnel_pb2.ConnectResponse, idempotent=False)
        return str(resp.client_id)

    def heartbeat(self, tunnel_id: str, client_id: str, channels: Iterable[Channel]) -> list[Channel]:
        """Report local channel states; returns the channels the server assigns to this client."""
        req = tunnel_pb2.HeartbeatRequest(tunnel_id=tunnel_id, client_id=client_id)
        _wire_channels(channels, req.channels)
        resp = self._call("heartbeat", req, tunnel_pb2.HeartbeatResponse, idempotent=True)
        return [
            Channel(c.channel_id, c.version, _STATUS_FROM_WIRE[c.status])
            for c in resp.channels
        ]

    def shutdown(self, tunnel_id: str, client_id: str) -> None:
        """Leave the tunnel: the server releases this client's channels."""
        req = tunnel_pb2.ShutdownRequest(tunnel_id=tunnel_id, client_id=client_id)
        self._call("shutdown", req, tunnel_pb2.ShutdownResponse, idempotent=True)

    def get_checkpoint(self, tunnel_id: str, client_id: str, channel_id: str) -> tuple[str, int]:
        """The stored ``(token, sequence_number)`` of a channel; the token may be :data:`FINISHED`."""
        req = tunnel_pb2.GetCheckpointRequest(tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id)
        resp = self._call("getcheckpoint", req, tunnel_pb2.GetCheckpointResponse, idempotent=True)
        return str(resp.checkpoint), int(resp.sequence_number)

    def read_records(self, tunnel_id: str, client_id: str, channel_id: str, token: str) -> ReadResult:
        """Read the records after ``token``. Never call it with :data:`FINISHED`.

        The records come as one :class:`~airflow_tablestore.client.records.Records` batch: decoded on first use
        (iterating, indexing, ``decode()``), or turned straight into Arrow by the Spark readers. Where the compiled
        module is in use they stay in the answer's bytes, split in C (no protobuf message per record)."""
        raw = self._read(tunnel_id, client_id, channel_id, token)
        split = split_read_records(raw.body)
        if split is not None:
            records, next_token, may_more = split
            return ReadResult(records, next_token, may_more, len(raw.body))
        resp = self._transport.parse(_READ_PATH, raw, tunnel_pb2.ReadRecordsResponse)
        return ReadResult(Records.from_messages(resp.records), resp.next_token, _may_more(resp), len(raw.body))

    def _read(self, tunnel_id: str, client_id: str, channel_id: str, token: str) -> RawResponse:
        """One ReadRecords call's verified answer."""
        if token == FINISHED:
            raise TablestoreClientError(f"channel {channel_id} is finished: there is nothing left to read")
        req = tunnel_pb2.ReadRecordsRequest(
            tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id, token=token
        )
        return self._transport.call_raw(_READ_PATH, req.SerializeToString(), idempotent=True)

    def checkpoint(
        self, tunnel_id: str, client_id: str, channel_id: str, token: str, sequence_number: int
    ) -> None:
        """Store ``token`` (a fully processed batch's next token, or :data:`FINISHED`) for the channel.
        Raises :class:`SequenceNumberMismatchError` when ``sequence_number`` is not newer than the stored
        one."""
        req = tunnel_pb2.CheckpointRequest(
            tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id,
            checkpoint=token, sequence_number=sequence_number,
        )
        self._call("checkpoint", req, tunnel_pb2.CheckpointResponse, idempotent=False)

    def schedule(self, tunnel_id: str, channels: Iterable[Channel]) -> None:
        """Manually open (OPEN), suspend (CLOSING) or terminate (TERMINATED) channels. Versions are
        ignored."""
        req = tunnel_pb2.ScheduleRequest(tunnel_id=tunnel_id)
        _wire_channels((Channel(c.channel_id, 0, c.status) for c in channels), req.channels)
        self._call("schedule", req, tunnel_pb2.ScheduleResponse, idempotent=False)

