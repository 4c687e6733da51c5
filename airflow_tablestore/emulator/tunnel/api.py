"""The Tunnel Service API surface: one handler per ``/tunnel/<op>`` action (request body → response).

:meth:`TunnelApi.routes` is the surface's one route table (wire path → handler named after the action); the
handlers parse the request, call the :class:`~.service.TunnelService` part that owns the action (or the
:class:`~.reader.RecordReader` data path) and build the response.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.api_common import Handler, parse
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.tunnel.model import (
    STATUS_TO_WIRE,
    TUNNEL_TYPES,
    WIRE_TO_STATUS,
    TunnelState,
)
from airflow_tablestore.emulator.tunnel.reader import RecordReader
from airflow_tablestore.emulator.tunnel.service import TunnelService
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs


def _required(value: str, field: str) -> str:
    if not value:
        raise parameter_invalid(f"{field} must be non-empty")
    return value


def tunnel_info(t: TunnelState, instance: str) -> tunnel_pb2.TunnelInfo:
    info = tunnel_pb2.TunnelInfo(
        tunnel_id=t.tunnel_id, tunnel_type=t.tunnel_type, table_name=t.table_name, instance_name=instance,
        stream_id=t.stream_id, stage=t.stage, expired=t.expired, tunnel_name=t.tunnel_name, public=False,
        create_time=t.create_time_ns,
    )
    if t.stream_config:
        info.stream_tunnel_config.ParseFromString(t.stream_config)
    return info


class TunnelApi:
    """The tunnel service on ``store`` (restoring its persisted state), bound to the wire messages."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.service = TunnelService(store, clock, config)
        self.reader = RecordReader(self.service)
        self.instance = config.instance

    def routes(self) -> dict[str, Handler]:
        """The route table: wire path → handler."""
        return {
            "/tunnel/create": self.create_tunnel,
            "/tunnel/delete": self.delete_tunnel,
            "/tunnel/list": self.list_tunnel,
            "/tunnel/describe": self.describe_tunnel,
            "/tunnel/connect": self.connect,
            "/tunnel/heartbeat": self.heartbeat,
            "/tunnel/shutdown": self.shutdown,
            "/tunnel/getcheckpoint": self.get_checkpoint,
            "/tunnel/readrecords": self.read_records,
            "/tunnel/checkpoint": self.checkpoint,
            "/tunnel/schedule": self.schedule,
        }

    def create_tunnel(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.CreateTunnelRequest, body).tunnel
        ttype = TUNNEL_TYPES.get(req.tunnel_type)
        if ttype is None:
            raise parameter_invalid(f"unknown tunnel_type {req.tunnel_type}")
        cfg = req.stream_tunnel_config if req.HasField("stream_tunnel_config") else None
        flag = cfg.flag if cfg is not None and cfg.HasField("flag") else None
        start_ns = int(cfg.startOffset) if cfg is not None else 0
        end_ns = int(cfg.endOffset) if cfg is not None else 0
        tunnel_id = self.service.lifecycle.create_tunnel(
            _required(req.table_name, "table_name"), _required(req.tunnel_name, "tunnel_name"), ttype,
            flag=flag, start_ns=start_ns, end_ns=end_ns,
            stream_config=cfg.SerializeToString() if cfg is not None else b"",
        )
        return tunnel_pb2.CreateTunnelResponse(tunnel_id=tunnel_id)

    def delete_tunnel(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.DeleteTunnelRequest, body)
        self.service.lifecycle.delete_tunnel(req.table_name, req.tunnel_name)
        return tunnel_pb2.DeleteTunnelResponse()

    def list_tunnel(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.ListTunnelRequest, body)
        tunnels = self.service.lifecycle.list_tunnels(req.table_name or None)
        return tunnel_pb2.ListTunnelResponse(tunnels=[tunnel_info(t, self.instance) for t in tunnels])

    def describe_tunnel(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.DescribeTunnelRequest, body)
        tunnel, views, rpo = self.service.lifecycle.describe(req.table_name, req.tunnel_name)
        resp = tunnel_pb2.DescribeTunnelResponse(tunnel=tunnel_info(tunnel, self.instance), tunnel_rpo=rpo)
        for v in views:
            resp.channels.add(channel_id=v.channel_id, channel_type=v.kind, channel_status=v.status,
                              client_id=v.owner, channel_rpo=v.rpo_ns, channel_count=v.count)
        return resp

    def connect(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.ConnectRequest, body)
        cfg = req.client_config
        client_id = self.service.clients.connect(req.tunnel_id,
                                                 cfg.timeout if cfg.HasField("timeout") else None,
                                                 cfg.client_tag or None)
        return tunnel_pb2.ConnectResponse(client_id=client_id)

    def heartbeat(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.HeartbeatRequest, body)
        reported = [(c.channel_id, c.version, WIRE_TO_STATUS.get(c.status, "")) for c in req.channels]
        owned = self.service.scheduling.heartbeat(req.tunnel_id, req.client_id, reported)
        resp = tunnel_pb2.HeartbeatResponse()
        for ch in owned:
            resp.channels.add(channel_id=ch.channel_id, version=ch.version, status=STATUS_TO_WIRE[ch.status])
        return resp

    def shutdown(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.ShutdownRequest, body)
        self.service.clients.shutdown(req.tunnel_id, req.client_id)
        return tunnel_pb2.ShutdownResponse()

    def get_checkpoint(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.GetCheckpointRequest, body)
        token, seq = self.service.checkpoints.get_checkpoint(req.tunnel_id, req.client_id, req.channel_id)
        return tunnel_pb2.GetCheckpointResponse(checkpoint=token, sequence_number=seq)

    def read_records(self, body: bytes) -> bytes:
        req = parse(tunnel_pb2.ReadRecordsRequest, body)
        return self.reader.read(req.tunnel_id, req.client_id, req.channel_id, req.token)

    def checkpoint(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.CheckpointRequest, body)
        self.service.checkpoints.checkpoint(req.tunnel_id, req.client_id, req.channel_id, req.checkpoint,
                                            req.sequence_number)
        return tunnel_pb2.CheckpointResponse()

    def schedule(self, body: bytes) -> Message:
        req = parse(tunnel_pb2.ScheduleRequest, body)
        requested = [(c.channel_id, WIRE_TO_STATUS.get(c.status, "")) for c in req.channels]
        self.service.scheduling.schedule(req.tunnel_id, requested)
        return tunnel_pb2.ScheduleResponse()
