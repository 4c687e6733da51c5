"""In-process helpers for the tunnel service unit tests: a real Store, tables, writes, a driving client."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import EmulatorError
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.keys import encode_key
from airflow_tablestore.emulator.store.model import ACTION_DELETE, ACTION_PUT
from airflow_tablestore.emulator.tunnel.api import TunnelApi
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2
FINISHED = "finished"
OPEN, CLOSING, CLOSE, TERMINATED = 1, 2, 3, 4


def table_meta(name: str, *, stream: bool = True, retention_hours: int = 168) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "pk": [["pk", "INTEGER"]],
        "defined": [],
        "options": {"ttl": -1, "max_versions": 1, "deviation": 86400, "allow_update": True},
        "reserved": [0, 0],
        "created_s": time.time(),
        "last_increase": 0,
    }
    if stream:
        meta["stream"] = {"enabled": True, "expiration": retention_hours}
    return meta


def put(store: Store, table: str, pk: int, value: str) -> int | None:
    """Write one row (single column ``col``) and its stream record; returns the stream seq."""
    info = store.tables.get(table)
    assert info is not None
    with store.db.write() as txn:
        ts_ms = store.clock.now_ms()
        txn.put(info.table_id, encode_key([pk]), {"col": [(ts_ms, value)]})
        return store.stream.append(txn, info, ACTION_PUT, [("pk", pk)], [("col", value, None, ts_ms)])


def delete(store: Store, table: str, pk: int) -> int | None:
    info = store.tables.get(table)
    assert info is not None
    with store.db.write() as txn:
        txn.delete(info.table_id, encode_key([pk]))
        return store.stream.append(txn, info, ACTION_DELETE, [("pk", pk)], [])


def decode_pk_col(record: bytes) -> tuple[int, str | None]:
    """(pk, value of ``col`` or None) of a one-row PlainBuffer record."""
    row = decode_row(record)
    value = row.cells[0].value if row.cells else None
    return int(row.pk[0][1]), None if value is None else str(value)  # type: ignore[arg-type]


def new_store(path: str, clock: Clock | None = None, partitions: int = 2) -> Store:
    return Store(path, clock or Clock(), stream_partitions=partitions)


class CallError(Exception):
    """A tunnel call answered with an error (code, HTTP status)."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.code, self.status, self.message = code, status, message


Call = Callable[[str, Any, Any], Any]


def in_process_call(handlers: dict[str, Callable[[bytes], Any]]) -> Call:
    """A ``call(path, request, response_cls)`` going straight to the handlers (serialising both ways)."""

    def call(path: str, request: Any, response_cls: Any) -> Any:
        try:
            resp = handlers[path](request.SerializeToString())
        except EmulatorError as exc:
            raise CallError(exc.code, exc.status, exc.message) from None
        out = response_cls()
        out.ParseFromString(resp if isinstance(resp, bytes) else resp.SerializeToString())
        return out

    return call


class Tunnel:
    """Thin typed wrapper over the tunnel RPCs for tests (in-process or HTTP, via ``call``)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    def create(self, table: str, name: str, ttype: int = 3, **cfg: Any) -> str:
        t = tunnel_pb2.Tunnel(table_name=table, tunnel_name=name, tunnel_type=ttype)
        if cfg:
            t.stream_tunnel_config.CopyFrom(tunnel_pb2.StreamTunnelConfig(**cfg))
        resp = self.call("/tunnel/create", tunnel_pb2.CreateTunnelRequest(tunnel=t), tunnel_pb2.CreateTunnelResponse)
        return str(resp.tunnel_id)

    def describe(self, table: str, name: str) -> Any:
        return self.call("/tunnel/describe", tunnel_pb2.DescribeTunnelRequest(table_name=table, tunnel_name=name),
                         tunnel_pb2.DescribeTunnelResponse)

    def list_tunnels(self, table: str = "") -> Any:
        return self.call("/tunnel/list", tunnel_pb2.ListTunnelRequest(table_name=table),
                         tunnel_pb2.ListTunnelResponse).tunnels

    def delete(self, table: str, name: str) -> None:
        self.call("/tunnel/delete", tunnel_pb2.DeleteTunnelRequest(table_name=table, tunnel_name=name),
                  tunnel_pb2.DeleteTunnelResponse)

    def connect(self, tunnel_id: str, timeout: int = 300, tag: str = "test") -> str:
        req = tunnel_pb2.ConnectRequest(tunnel_id=tunnel_id,
                                        client_config=tunnel_pb2.ClientConfig(timeout=timeout, client_tag=tag))
        return str(self.call("/tunnel/connect", req, tunnel_pb2.ConnectResponse).client_id)

    def heartbeat(self, tunnel_id: str, client_id: str,
                  channels: Sequence[tuple[str, int, int]] = ()) -> dict[str, tuple[int, int]]:
        req = tunnel_pb2.HeartbeatRequest(tunnel_id=tunnel_id, client_id=client_id)
        for cid, version, status in channels:
            req.channels.add(channel_id=cid, version=version, status=status)
        resp = self.call("/tunnel/heartbeat", req, tunnel_pb2.HeartbeatResponse)
        return {c.channel_id: (c.version, c.status) for c in resp.channels}

    def shutdown(self, tunnel_id: str, client_id: str) -> None:
        self.call("/tunnel/shutdown", tunnel_pb2.ShutdownRequest(tunnel_id=tunnel_id, client_id=client_id),
                  tunnel_pb2.ShutdownResponse)

    def get_checkpoint(self, tunnel_id: str, client_id: str, channel_id: str) -> tuple[str, int]:
        resp = self.call("/tunnel/getcheckpoint", tunnel_pb2.GetCheckpointRequest(
            tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id), tunnel_pb2.GetCheckpointResponse)
        return str(resp.checkpoint), int(resp.sequence_number)

    def read(self, tunnel_id: str, client_id: str, channel_id: str, token: str) -> Any:
        return self.call("/tunnel/readrecords", tunnel_pb2.ReadRecordsRequest(
            tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id, token=token),
            tunnel_pb2.ReadRecordsResponse)

    def checkpoint(self, tunnel_id: str, client_id: str, channel_id: str, token: str, seq: int) -> None:
        self.call("/tunnel/checkpoint", tunnel_pb2.CheckpointRequest(
            tunnel_id=tunnel_id, client_id=client_id, channel_id=channel_id, checkpoint=token,
            sequence_number=seq), tunnel_pb2.CheckpointResponse)

    def schedule(self, tunnel_id: str, channels: list[tuple[str, int]]) -> None:
        req = tunnel_pb2.ScheduleRequest(tunnel_id=tunnel_id)
        for cid, status in channels:
            req.channels.add(channel_id=cid, version=0, status=status)
        self.call("/tunnel/schedule", req, tunnel_pb2.ScheduleResponse)

    # -- composite helpers ---------------------------------------------------------------------------
    def drain(self, tunnel_id: str, client_id: str, channel_id: str, *, checkpoint: bool = True,
              max_calls: int = 10_000) -> tuple[list[tuple[int, bytes]], str]:
        """Read a channel from its checkpoint until "finished" or an empty head read; checkpoint as it goes.

        Returns the records ``(action, plainbuffer)`` and the last token.
        """
        token, seq = self.get_checkpoint(tunnel_id, client_id, channel_id)
        out: list[tuple[int, bytes]] = []
        for _ in range(max_calls):
            if token == FINISHED:
                break
            resp = self.read(tunnel_id, client_id, channel_id, token)
            out.extend((r.action_type, r.record) for r in resp.records)
            token = resp.next_token
            if checkpoint:
                seq += 1
                self.checkpoint(tunnel_id, client_id, channel_id, token, seq)
            if not resp.records and not resp.may_more_record:
                break
        return out, token


class Env:
    """A store + clock + tunnel handlers, rebuildable on the same database (restart)."""

    def __init__(self, path: Path, **config: Any) -> None:
        self.path = path
        self.clock = Clock()
        self.config = EmulatorConfig(**{"base_channel_rows": 10, "max_read_records": 7, **config})
        self.store = new_store(str(path / "emu.db"), self.clock, partitions=2)
        self.tunnel = Tunnel(in_process_call(TunnelApi(self.store, self.clock, self.config).routes()))

    def restart(self) -> None:
        self.store.close()
        self.store = new_store(str(self.path / "emu.db"), self.clock, partitions=2)
        self.tunnel = Tunnel(in_process_call(TunnelApi(self.store, self.clock, self.config).routes()))

    def create_table(self, name: str = "t", **kw: Any) -> str:
        self.store.tables.create(table_meta(name, **kw))
        return name


class SimWorker:
    """A minimal well-behaved tunnel worker: heartbeats, closes CLOSING channels, reports TERMINATED."""

    def __init__(self, tunnel: Tunnel, tunnel_id: str, tag: str, timeout: int = 300) -> None:
        self.tunnel, self.tunnel_id = tunnel, tunnel_id
        self.client_id = tunnel.connect(tunnel_id, timeout, tag)
        self.local: dict[str, tuple[int, int]] = {}
        self.records: dict[str, list[tuple[int, bytes]]] = {}

    def beat(self) -> dict[str, tuple[int, int]]:
        resp = self.tunnel.heartbeat(self.tunnel_id, self.client_id,
                                     [(c, v, s) for c, (v, s) in self.local.items()])
        merged: dict[str, tuple[int, int]] = {}
        for cid, (version, status) in resp.items():
            mine = self.local.get(cid)
            if mine is not None and mine[0] > version:
                merged[cid] = mine  # pending local transition wins
            elif status == CLOSING:
                merged[cid] = (version + 1, CLOSE)  # stop at once, report CLOSE next beat
            else:
                merged[cid] = (version, status)
        self.local = merged
        return resp

    def open_channels(self) -> set[str]:
        return {c for c, (_, s) in self.local.items() if s == OPEN}

    def work(self) -> None:
        """Drain every OPEN channel from its checkpoint; finished ones are reported TERMINATED next beat."""
        for cid in sorted(self.open_channels()):
            records, token = self.tunnel.drain(self.tunnel_id, self.client_id, cid)
            self.records.setdefault(cid, []).extend(records)
            if token == FINISHED:
                self.local[cid] = (self.local[cid][0] + 1, TERMINATED)
