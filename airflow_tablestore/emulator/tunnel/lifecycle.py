"""Tunnel lifecycle: create tunnels (snapshot and channels), list, describe (channel views, RPO) and delete.

Base channels come from a snapshot of the table taken at creation (one channel per key range of about
``base_channel_rows`` rows), stream channels from the table's stream partitions. The start of a stream
tunnel is the snapshot point, a start offset, everything retained (EARLIEST) or the creation point (LATEST).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import airflow_tablestore.emulator.tunnel.tokens as tokens
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.store.model import TableInfo
from airflow_tablestore.emulator.tunnel.balancing import parents_done
from airflow_tablestore.emulator.tunnel.clients import ClientRegistry
from airflow_tablestore.emulator.tunnel.expiry import TunnelExpiry
from airflow_tablestore.emulator.tunnel.model import (
    BASE_AND_STREAM,
    BASE_DATA,
    STAGE_BASE,
    STAGE_STREAM,
    TERMINATED,
    ChannelState,
    TunnelState,
)
from airflow_tablestore.emulator.tunnel.scheduling import ChannelScheduling
from airflow_tablestore.emulator.tunnel.shared import SharedState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChannelView:
    """One row of DescribeTunnel."""

    channel_id: str
    kind: str
    status: str
    owner: str
    rpo_ns: int
    count: int


class TunnelLifecycle:
    """CreateTunnel, ListTunnel, DescribeTunnel and DeleteTunnel."""

    def __init__(self, state: SharedState, clients: ClientRegistry, scheduling: ChannelScheduling,
                 expiry: TunnelExpiry) -> None:
        self.state = state
        self.clients = clients
        self.scheduling = scheduling
        self.expiry = expiry

    def create_tunnel(self, table: str, name: str, tunnel_type: str, *, flag: int | None,
                      start_ns: int, end_ns: int, stream_config: bytes) -> str:
        """Create a tunnel; base channels come from a snapshot taken now, stream channels from partitions."""
        if not table or not name:
            raise parameter_invalid("table_name and tunnel_name must be non-empty")
        info = self._table_info(table)
        if tunnel_type != BASE_DATA and not info.stream_enabled:
            raise parameter_invalid(
                f"table {table!r} has no stream enabled; a {tunnel_type} tunnel needs one "
                "(UpdateTable with stream_spec enable_stream=true)")
        if end_ns and start_ns and end_ns <= start_ns:
            raise parameter_invalid("stream end offset must be after the start offset")
        state, store = self.state, self.state.store
        with state.lock:
            for t in state.tunnels.values():
                if t.table_name == table and t.tunnel_name == name:
                    raise EmulatorError("OTSTunnelExist",
                                        f"tunnel {name!r} already exists on table {table!r}", 409)
            now_ns = state.clock.now_ns()
            tunnel_id = str(uuid.uuid4())
            snapshot_id: int | None = None
            ranges: Sequence[tuple[bytes | None, bytes | None]] = ()
            start_seq, min_ts_us, consume_ns = 0, 0, now_ns
            if tunnel_type in (BASE_DATA, BASE_AND_STREAM):
                snap = store.snapshots.create(table)
                snapshot_id = int(snap.snapshot_id)
                ranges = list(store.snapshots.ranges(snapshot_id, max(1, state.config.base_channel_rows)))
                start_seq, consume_ns = int(snap.stream_seq), int(snap.timestamp_us) * 1000
            elif start_ns:  # Stream tunnel from a start offset (ns)
                min_ts_us = -(-start_ns // 1000)
                consume_ns = start_ns
            elif flag == 1:  # EARLIEST: everything retained
                oldest = [store.stream.oldest_retained_us(table, p.partition_id)
                          for p in store.stream.partitions(table)]
                known = [o for o in oldest if o is not None]
                consume_ns = (min(known) - 1) * 1000 if known else now_ns
            else:  # LATEST: the creation point
                start_seq = store.stream.head_seq
            stage = STAGE_BASE if tunnel_type in (BASE_DATA, BASE_AND_STREAM) else STAGE_STREAM
            tunnel = TunnelState(
                tunnel_id=tunnel_id, table_name=table, tunnel_name=name, tunnel_type=tunnel_type,
                stage=stage,
                create_time_ns=now_ns, stream_id=info.stream_id or "", snapshot_id=snapshot_id,
                start_seq=start_seq, start_min_ts_us=min_ts_us, start_ns=consume_ns,
                end_ns=end_ns if tunnel_type != BASE_DATA else 0, stream_config=stream_config,
            )
            for n, (lo, hi) in enumerate(ranges):
                cid = f"BaseData_{n}"
                tunnel.channels[cid] = ChannelState(
                    channel_id=cid, kind=BASE_DATA, ordinal=n, range_start=lo, range_end=hi,
                    ckpt_token=tokens.encode_base(tokens.BasePosition(b"", 0),
                                                  tokens.binding(tunnel_id, cid)),
                )
            state.tunnels[tunnel_id] = tunnel
            if tunnel.has_stream:
                self.scheduling.sync_partitions(tunnel)
            self.scheduling.advance_stage(tunnel)
            state.repo.save(tunnels=[tunnel], channels=[(tunnel_id, c) for c in tunnel.channels.values()])
            log.info("tunnel %s (%s) created on %s: %d base, %d stream channel(s)", name, tunnel_type,
                     table, len(ranges), len(tunnel.channels) - len(ranges))
            return tunnel_id

    def _table_info(self, table: str) -> TableInfo:
        try:
            info = self.state.store.tables.get(table)
        except EmulatorError as exc:
            raise parameter_invalid(f"table {table!r} does not exist") from exc
        if info is None:
            raise parameter_invalid(f"table {table!r} does not exist")
        return info

    def list_tunnels(self, table: str | None) -> list[TunnelState]:
        with self.state.lock:
            result = [t for t in self.state.tunnels.values() if not table or t.table_name == table]
            for tunnel in result:
                self.expiry.check(tunnel)
            return result

    def delete_tunnel(self, table: str, name: str) -> None:
        state = self.state
        with state.lock:
            tunnel = state.tunnel_by_name(table, name)
            state.tunnels.pop(tunnel.tunnel_id)
            for cid in [c.client_id for c in state.clients.values() if c.tunnel_id == tunnel.tunnel_id]:
                state.clients.pop(cid)
            state.repo.delete_tunnel(tunnel.tunnel_id)
            state.drop_snapshot(tunnel.snapshot_id)
            log.info("tunnel %s deleted", tunnel.tunnel_name)

    def describe(self, table: str, name: str) -> tuple[TunnelState, list[ChannelView], int]:
        """The tunnel, a view of every channel (TERMINATED ones included) and the tunnel consume point."""
        with self.state.lock:
            tunnel = self.state.tunnel_by_name(table, name)
            self.clients.reap(self.state.clock.now_us(), tunnel.tunnel_id)
            if tunnel.has_stream:
                changed = self.scheduling.sync_partitions(tunnel)
                if changed:
                    self.state.repo.save(channels=[(tunnel.tunnel_id, c) for c in changed])
            self.expiry.check(tunnel)
            views = [
                ChannelView(c.channel_id, c.kind, c.status, c.owner or "",
                            c.ckpt_rpo_ns if c.is_stream else 0, c.ckpt_count)
                for c in tunnel.channels.values()
            ]
            return tunnel, views, self._tunnel_rpo(tunnel)

    def _tunnel_rpo(self, tunnel: TunnelState) -> int:
        if tunnel.stage != STAGE_STREAM:
            return 0
        stream = [c for c in tunnel.channels.values() if c.is_stream]
        live = [c.ckpt_rpo_ns for c in stream if c.status != TERMINATED and parents_done(tunnel, c)]
        if live:
            return min(live)
        return max((c.ckpt_rpo_ns for c in stream), default=0)
