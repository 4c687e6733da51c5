"""The tunnel service's control plane: tunnels, channels, clients, heartbeats, rebalancing, checkpoints.

All state lives in memory under one lock and is written through to SQLite (:mod:`.persistence`). Client
liveness is evaluated lazily on every request against the emulator clock (deterministic, time-travel aware,
restart safe). The data path (ReadRecords) is in :mod:`.reader`.

Size (~515 lines): one lock guards all of this state, so the control plane is one class today; splitting
clients, channel assignment and checkpoints into modules over that state is planned in issue 13 (structure).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.tunnel import tokens
from airflow_tablestore.emulator.tunnel.balancing import parents_done, rebalance
from airflow_tablestore.emulator.tunnel.errors import (
    resource_gone,
    sequence_mismatch,
    tunnel_expired,
    tunnel_not_exist,
)
from airflow_tablestore.emulator.tunnel.persistence import TunnelRepository
from airflow_tablestore.emulator.tunnel.state import (
    BASE_AND_STREAM,
    BASE_DATA,
    CLOSE,
    CLOSING,
    OPEN,
    STAGE_BASE,
    STAGE_STREAM,
    STREAM,
    TERMINATED,
    ChannelState,
    ClientState,
    TunnelState,
)
from airflow_tablestore.emulator.tunnel.store_api import StoreAPI

log = logging.getLogger(__name__)

DEFAULT_CLIENT_TIMEOUT_S = 300
MAX_CLIENT_TIMEOUT_S = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class ReadGrant:
    """What the data path needs to serve one ReadRecords call (a copy taken under the lock)."""

    tunnel_id: str
    table_name: str
    channel_id: str
    kind: str
    partition_id: str
    snapshot_id: int | None
    range_start: bytes | None
    range_end: bytes | None
    end_ns: int


@dataclass(frozen=True, slots=True)
class ChannelView:
    """One row of DescribeTunnel."""

    channel_id: str
    kind: str
    status: str
    owner: str
    rpo_ns: int
    count: int


def _sanitize_partition(pid: str) -> str:
    return pid.replace("_", "-") or "p"


class TunnelService:
    """Tunnel control plane over the emulator :class:`Store`. Thread safe."""

    def __init__(self, store: StoreAPI, clock: Clock, config: EmulatorConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.lock = threading.RLock()
        self.repo = TunnelRepository(store)
        self.tunnels, self.clients = self.repo.load()
        now = clock.now_us()
        # After a restart, every remembered client gets a full timeout from now before it is reaped.
        for client in self.clients.values():
            client.last_seen_us = max(client.last_seen_us, now)
        if self.tunnels:
            log.info("tunnel service restored %d tunnel(s), %d client(s)", len(self.tunnels), len(self.clients))

    # ================================================================ lookups ====
    def _tunnel_by_id(self, tunnel_id: str) -> TunnelState:
        tunnel = self.tunnels.get(tunnel_id)
        if tunnel is None:
            raise tunnel_not_exist()
        return tunnel

    def _tunnel_by_name(self, table: str, name: str) -> TunnelState:
        for tunnel in self.tunnels.values():
            if tunnel.table_name == table and tunnel.tunnel_name == name:
                return tunnel
        raise tunnel_not_exist()

    def _live_client(self, tunnel: TunnelState, client_id: str, now_us: int) -> ClientState:
        client = self.clients.get(client_id)
        if client is None or client.tunnel_id != tunnel.tunnel_id:
            raise resource_gone("client not exist or heartbeat timed out; reconnect with the tunnel id")
        if client.expired(now_us):
            self._drop_client(client, reason="heartbeat timeout")
            raise resource_gone("Tunnel Client heartbeat timeout; reconnect with the tunnel id")
        return client

    @staticmethod
    def _channel(tunnel: TunnelState, channel_id: str) -> ChannelState:
        channel = tunnel.channels.get(channel_id)
        if channel is None:
            raise parameter_invalid(f"channel not exist: {channel_id}")
        return channel

    # ================================================================ clients / reaping ====
    def _drop_client(self, client: ClientState, *, reason: str) -> None:
        """Release the client's channels (CLOSE, version+1) and forget it."""
        self.clients.pop(client.client_id, None)
        tunnel = self.tunnels.get(client.tunnel_id)
        changed: list[tuple[str, ChannelState]] = []
        if tunnel is not None:
            for ch in tunnel.channels.values():
                if ch.owner == client.client_id:
                    ch.owner = None
                    if ch.status in (OPEN, CLOSING):
                        ch.status = CLOSE
                        ch.version += 1
                    changed.append((tunnel.tunnel_id, ch))
        self.repo.save(channels=changed, deleted_clients=[client.client_id])
        log.info("tunnel client %s dropped (%s); released %d channel(s)", client.client_id, reason, len(changed))

    def _reap(self, now_us: int, tunnel_id: str | None = None) -> None:
        for client in list(self.clients.values()):
            if (tunnel_id is None or client.tunnel_id == tunnel_id) and client.expired(now_us):
                self._drop_client(client, reason="heartbeat timeout")

    # ================================================================ create / list / delete ====
    def create_tunnel(self, table: str, name: str, tunnel_type: str, *, flag: int | None,
                      start_ns: int, end_ns: int, stream_config: bytes) -> str:
        """Create a tunnel; base channels come from a snapshot taken now, stream channels from partitions."""
        if not table or not name:
            raise parameter_invalid("table_name and tunnel_name must be non-empty")
        info = self._table_info(table)
        if tunnel_type != BASE_DATA and not _stream_enabled(info):
            raise parameter_invalid(
                f"table {table!r} has no stream enabled; a {tunnel_type} tunnel needs one "
                "(UpdateTable with stream_spec enable_stream=true)")
        if end_ns and start_ns and end_ns <= start_ns:
            raise parameter_invalid("stream end offset must be after the start offset")
        with self.lock:
            for t in self.tunnels.values():
                if t.table_name == table and t.tunnel_name == name:
                    raise EmulatorError("OTSTunnelExist", f"tunnel {name!r} already exists on table {table!r}",
                                        409)
            now_ns = self.clock.now_ns()
            tunnel_id = str(uuid.uuid4())
            snapshot_id: int | None = None
            ranges: Sequence[tuple[bytes | None, bytes | None]] = ()
            start_seq, min_ts_us, consume_ns = 0, 0, now_ns
            if tunnel_type in (BASE_DATA, BASE_AND_STREAM):
                snap = self.store.create_snapshot(table)
                snapshot_id = int(snap.snapshot_id)
                ranges = list(self.store.snapshot_ranges(snapshot_id, max(1, self.config.base_channel_rows)))
                start_seq, consume_ns = int(snap.stream_seq), int(snap.timestamp_us) * 1000
            elif start_ns:  # Stream tunnel from a start offset (ns)
                min_ts_us = -(-start_ns // 1000)
                consume_ns = start_ns
            elif flag == 1:  # EARLIEST: everything retained
                oldest = [self.store.oldest_retained_us(table, p.partition_id)
                          for p in self.store.stream_partitions(table)]
                known = [o for o in oldest if o is not None]
                consume_ns = (min(known) - 1) * 1000 if known else now_ns
            else:  # LATEST: the creation point
                start_seq = int(self.store.stream_head_seq())
            stage = STAGE_BASE if tunnel_type in (BASE_DATA, BASE_AND_STREAM) else STAGE_STREAM
            tunnel = TunnelState(
                tunnel_id=tunnel_id, table_name=table, tunnel_name=name, tunnel_type=tunnel_type, stage=stage,
                create_time_ns=now_ns, stream_id=_stream_id(info, table), snapshot_id=snapshot_id,
                start_seq=start_seq, start_min_ts_us=min_ts_us, start_ns=consume_ns,
                end_ns=end_ns if tunnel_type != BASE_DATA else 0, stream_config=stream_config,
            )
            for n, (lo, hi) in enumerate(ranges):
                cid = f"BaseData_{n}"
                tunnel.channels[cid] = ChannelState(
                    channel_id=cid, kind=BASE_DATA, ordinal=n, range_start=lo, range_end=hi,
                    ckpt_token=tokens.encode_base(tokens.BasePosition(b"", 0), tokens.binding(tunnel_id, cid)),
                )
            self.tunnels[tunnel_id] = tunnel
            if tunnel.has_stream:
                self._sync_partitions(tunnel)
            self._advance_stage(tunnel)
            self.repo.save(tunnels=[tunnel], channels=[(tunnel_id, c) for c in tunnel.channels.values()])
            log.info("tunnel %s (%s) created on %s: %d base, %d stream channel(s)", name, tunnel_type, table,
                     len(ranges), len(tunnel.channels) - len(ranges))
            return tunnel_id

    def _table_info(self, table: str) -> Any:
        try:
            info = self.store.get_table_info(table)
        except EmulatorError as exc:
            raise parameter_invalid(f"table {table!r} does not exist") from exc
        if info is None:
            raise parameter_invalid(f"table {table!r} does not exist")
        return info

    def list_tunnels(self, table: str | None) -> list[TunnelState]:
        with self.lock:
            result = [t for t in self.tunnels.values() if not table or t.table_name == table]
            for tunnel in result:
                self._check_expiry(tunnel)
            return result

    def delete_tunnel(self, table: str, name: str) -> None:
        with self.lock:
            tunnel = self._tunnel_by_name(table, name)
            self.tunnels.pop(tunnel.tunnel_id)
            for cid in [c.client_id for c in self.clients.values() if c.tunnel_id == tunnel.tunnel_id]:
                self.clients.pop(cid)
            self.repo.delete_tunnel(tunnel.tunnel_id)
            self._drop_snapshot(tunnel)
            log.info("tunnel %s deleted", tunnel.tunnel_name)

    def _drop_snapshot(self, tunnel: TunnelState) -> None:
        if tunnel.snapshot_id is not None:
            try:
                self.store.drop_snapshot(tunnel.snapshot_id)
            except EmulatorError:
                log.warning("could not drop snapshot %s", tunnel.snapshot_id)

    # ================================================================ describe ====
    def describe(self, table: str, name: str) -> tuple[TunnelState, list[ChannelView], int]:
        """The tunnel, a view of every channel (TERMINATED ones included) and the tunnel consume point."""
        with self.lock:
            tunnel = self._tunnel_by_name(table, name)
            self._reap(self.clock.now_us(), tunnel.tunnel_id)
            if tunnel.has_stream:
                changed = self._sync_partitions(tunnel)
                if changed:
                    self.repo.save(channels=[(tunnel.tunnel_id, c) for c in changed])
            self._check_expiry(tunnel)
            views = [
                ChannelView(c.channel_id, c.kind, c.status, c.owner or "", c.ckpt_rpo_ns if c.is_stream else 0,
                            c.ckpt_count)
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

    # ================================================================ connect / shutdown ====
    def connect(self, tunnel_id: str, timeout_s: int | None, client_tag: str | None) -> str:
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            if self._check_expiry(tunnel):
                raise tunnel_expired()
            timeout = int(timeout_s) if timeout_s and timeout_s > 0 else DEFAULT_CLIENT_TIMEOUT_S
            timeout = min(timeout, MAX_CLIENT_TIMEOUT_S)
            tag = (client_tag or "client").strip() or "client"
            client = ClientState(client_id=f"{tag}-{uuid.uuid4().hex[:16]}", tunnel_id=tunnel_id,
                                 timeout_s=timeout, last_seen_us=self.clock.now_us())
            self.clients[client.client_id] = client
            self.repo.save(clients=[client])
            log.info("tunnel %s: client %s connected (timeout %ss)", tunnel.tunnel_name, client.client_id,
                     timeout)
            return client.client_id

    def shutdown(self, tunnel_id: str, client_id: str) -> None:
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            client = self._live_client(tunnel, client_id, self.clock.now_us())
            self._drop_client(client, reason="shutdown")

    # ================================================================ heartbeat ====
    def heartbeat(self, tunnel_id: str, client_id: str,
                  reported: Iterable[tuple[str, int, str]]) -> list[ChannelState]:
        """Apply the client's reported channel states, rebalance, return its OPEN/CLOSING channels."""
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            now = self.clock.now_us()
            self._reap(now, tunnel_id)
            client = self._live_client(tunnel, client_id, now)
            client.last_seen_us = now
            changed: dict[str, ChannelState] = {}
            for channel_id, version, status in reported:
                ch = tunnel.channels.get(channel_id)
                if ch is None or ch.owner != client_id or version <= ch.version:
                    continue  # stale echo, not the owner, or unknown: ignored
                if status == CLOSE:
                    ch.status, ch.version, ch.owner = CLOSE, version, None
                    changed[ch.channel_id] = ch
                elif status == TERMINATED:
                    ch.status, ch.version, ch.owner = TERMINATED, version, None
                    changed[ch.channel_id] = ch
            if tunnel.has_stream:
                for ch in self._sync_partitions(tunnel):
                    changed[ch.channel_id] = ch
            self._advance_stage(tunnel)
            if self._check_expiry(tunnel):
                self.repo.save(channels=[(tunnel_id, c) for c in changed.values()], clients=[client])
                raise tunnel_expired()
            live = sum(1 for c in self.clients.values() if c.tunnel_id == tunnel.tunnel_id)
            for ch in rebalance(tunnel, client_id, live):
                changed[ch.channel_id] = ch
            self.repo.save(channels=[(tunnel_id, c) for c in changed.values()], clients=[client])
            return [c for c in tunnel.channels.values()
                    if c.owner == client_id and c.status in (OPEN, CLOSING)]

    # ================================================================ stages and partitions ====
    def _advance_stage(self, tunnel: TunnelState) -> None:
        if tunnel.stage != STAGE_BASE or not tunnel.base_done():
            return
        if tunnel.tunnel_type == BASE_AND_STREAM:
            tunnel.stage = STAGE_STREAM
            log.info("tunnel %s: base data done, stream phase starts", tunnel.tunnel_name)
        if tunnel.snapshot_id is not None:
            self._drop_snapshot(tunnel)
            tunnel.snapshot_id = None
        self.repo.save(tunnels=[tunnel])

    def _stream_gone(self, tunnel: TunnelState) -> bool:
        """The table (or its stream) this tunnel reads was deleted or re-created since the tunnel was made."""
        info = self.store.get_table_info(tunnel.table_name)
        return info is None or getattr(info, "stream_id", None) != tunnel.stream_id

    def _sync_partitions(self, tunnel: TunnelState) -> list[ChannelState]:
        """Create channels for stream partitions this tunnel has not seen yet (e.g. split children)."""
        if self._stream_gone(tunnel):
            return []
        known = {c.partition_id for c in tunnel.channels.values() if c.is_stream}
        created: list[ChannelState] = []
        ordinal = len(tunnel.channels)
        for part in self.store.stream_partitions(tunnel.table_name):
            pid = str(part.partition_id)
            if pid in known:
                continue
            start = tokens.StreamPosition(tunnel.start_seq, tunnel.start_min_ts_us, tunnel.start_ns, 0)
            channel_id = f"{_sanitize_partition(pid)}_{ordinal}"
            ch = ChannelState(
                channel_id=channel_id, kind=STREAM, ordinal=ordinal,
                partition_id=pid, parent_ids=tuple(str(p) for p in (part.parent_ids or ())),
                ckpt_token=tokens.encode_stream(start, tokens.binding(tunnel.tunnel_id, channel_id)),
                ckpt_rpo_ns=tunnel.start_ns,
            )
            if part.closed and not self.store.read_stream(tunnel.table_name, pid, tunnel.start_seq, 1):
                # A partition that was split before the tunnel's start point has nothing to deliver.
                ch.status, ch.ckpt_token = TERMINATED, tokens.FINISHED
            tunnel.channels[ch.channel_id] = ch
            created.append(ch)
            ordinal += 1
        return created

    # ================================================================ expiry ====
    def _check_expiry(self, tunnel: TunnelState) -> bool:
        """Mark (sticky) and return whether a stream position fell behind the retained stream log."""
        if tunnel.expired:
            return True
        if not tunnel.has_stream:
            return False
        if self._stream_gone(tunnel) and any(c.is_stream and c.status != TERMINATED for c in tunnel.channels.values()):
            self.mark_expired(tunnel)
            return True
        for ch in tunnel.channels.values():
            if ch.is_stream and ch.status != TERMINATED and self.position_expired(tunnel.table_name, ch.partition_id,
                                                                                 ch.ckpt_rpo_ns):
                self.mark_expired(tunnel)
                return True
        return False

    def position_expired(self, table: str, partition_id: str, consumed_ns: int) -> bool:
        """True when records after ``consumed_ns`` may have been trimmed: the position is older than the
        retention horizon and not already at the partition's oldest retained record."""
        horizon = self.store.retention_start_us(table)
        if horizon is None or consumed_ns >= int(horizon) * 1000:
            return False
        oldest = self.store.oldest_retained_us(table, partition_id)
        return oldest is None or consumed_ns < (int(oldest) - 1) * 1000

    def mark_expired(self, tunnel: TunnelState) -> None:
        with self.lock:
            if not tunnel.expired:
                tunnel.expired = True
                self.repo.save(tunnels=[tunnel])
                log.warning("tunnel %s expired: stream log retention passed its position", tunnel.tunnel_name)

    # ================================================================ checkpoints ====
    def get_checkpoint(self, tunnel_id: str, client_id: str, channel_id: str) -> tuple[str, int]:
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            self._live_client(tunnel, client_id, self.clock.now_us())
            ch = self._channel(tunnel, channel_id)
            return ch.ckpt_token, ch.ckpt_seq

    def checkpoint(self, tunnel_id: str, client_id: str, channel_id: str, token: str, seq: int) -> None:
        pos = None if token == tokens.FINISHED else tokens.decode(token, tokens.binding(tunnel_id, channel_id))
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            self._live_client(tunnel, client_id, self.clock.now_us())
            ch = self._channel(tunnel, channel_id)
            self._require_owner(ch, client_id)
            if pos is not None and isinstance(pos, tokens.StreamPosition) != ch.is_stream:
                raise parameter_invalid(f"token does not belong to a {ch.kind} channel")
            if seq <= ch.ckpt_seq:
                raise sequence_mismatch(ch.ckpt_seq, seq)
            ch.ckpt_token, ch.ckpt_seq = token, seq
            if pos is None:
                if ch.final_count is not None:
                    ch.ckpt_count = ch.final_count
                if ch.final_rpo_ns is not None and ch.is_stream:
                    ch.ckpt_rpo_ns = max(ch.ckpt_rpo_ns, ch.final_rpo_ns)
            else:
                ch.ckpt_count = pos.count
                if isinstance(pos, tokens.StreamPosition):
                    ch.ckpt_rpo_ns = pos.consumed_ns
            self.repo.save_checkpoint(tunnel_id, ch)

    @staticmethod
    def _require_owner(ch: ChannelState, client_id: str) -> None:
        if ch.owner != client_id or ch.status not in (OPEN, CLOSING):
            raise resource_gone(
                f"channel {ch.channel_id} is not held by this client (status {ch.status}); "
                "wait for the next heartbeat")

    # ================================================================ read authorisation ====
    def grant_read(self, tunnel_id: str, client_id: str, channel_id: str) -> ReadGrant:
        """Validate a ReadRecords call (tunnel, live client, ownership, expiry) and copy what it needs."""
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            self._live_client(tunnel, client_id, self.clock.now_us())
            ch = self._channel(tunnel, channel_id)
            self._require_owner(ch, client_id)
            if tunnel.expired:
                raise tunnel_expired()
            return ReadGrant(tunnel_id, tunnel.table_name, channel_id, ch.kind, ch.partition_id,
                             tunnel.snapshot_id, ch.range_start, ch.range_end, tunnel.end_ns)

    def note_finished(self, tunnel_id: str, channel_id: str, count: int, rpo_ns: int) -> None:
        """Remember what a later "finished" checkpoint of this channel stands for (count, consume point)."""
        with self.lock:
            tunnel = self.tunnels.get(tunnel_id)
            ch = tunnel.channels.get(channel_id) if tunnel else None
            if ch is not None and (ch.final_count, ch.final_rpo_ns) != (count, rpo_ns):
                ch.final_count, ch.final_rpo_ns = count, rpo_ns
                self.repo.save_final(tunnel_id, ch)

    def expire_tunnel(self, tunnel_id: str) -> None:
        with self.lock:
            tunnel = self.tunnels.get(tunnel_id)
            if tunnel is not None:
                self.mark_expired(tunnel)

    # ================================================================ schedule ====
    def schedule(self, tunnel_id: str, requested: Iterable[tuple[str, str]]) -> None:
        """Manual control: OPEN resumes, CLOSING suspends (takes the channel back), TERMINATED ends it."""
        with self.lock:
            tunnel = self._tunnel_by_id(tunnel_id)
            items = list(requested)
            for channel_id, _ in items:
                self._channel(tunnel, channel_id)
            changed = []
            for channel_id, status in items:
                ch = tunnel.channels[channel_id]
                if ch.status == TERMINATED:
                    continue
                if status == OPEN:
                    ch.suspended = False
                elif status == CLOSING:
                    ch.suspended = True
                    if ch.status == OPEN and ch.owner:
                        ch.status, ch.version = CLOSING, ch.version + 1
                elif status == TERMINATED:
                    ch.status, ch.version, ch.owner = TERMINATED, ch.version + 1, None
                    ch.ckpt_token = tokens.FINISHED
                else:
                    raise parameter_invalid(f"cannot schedule channel {channel_id} to {status}")
                changed.append((tunnel_id, ch))
            self.repo.save(channels=changed)
            self._advance_stage(tunnel)


def _stream_enabled(info: Any) -> bool:
    for attr in ("stream_enabled", "enable_stream"):
        if hasattr(info, attr):
            return bool(getattr(info, attr))
    stream = getattr(info, "stream", None) or getattr(info, "stream_spec", None)
    if stream is not None:
        return bool(getattr(stream, "enable_stream", getattr(stream, "enabled", False)))
    return False


def _stream_id(info: Any, table: str) -> str:
    sid = getattr(info, "stream_id", None)
    return str(sid) if sid else f"{table}_stream"


__all__ = ["ChannelView", "ReadGrant", "TunnelService"]
