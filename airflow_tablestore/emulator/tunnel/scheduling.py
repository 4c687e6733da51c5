"""Channel scheduling of the tunnel control plane: heartbeats, rebalancing calls, manual schedule, stages.

A heartbeat applies the client's reported channel states, creates channels for new stream partitions (split
or merge children), advances the tunnel's stage and rebalances the channels over the live clients
(:func:`~.balancing.rebalance`). ``schedule`` is the manual control of single channels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import airflow_tablestore.emulator.tunnel.tokens as tokens
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.tunnel.balancing import rebalance
from airflow_tablestore.emulator.tunnel.clients import ClientRegistry
from airflow_tablestore.emulator.tunnel.errors import tunnel_expired
from airflow_tablestore.emulator.tunnel.expiry import TunnelExpiry
from airflow_tablestore.emulator.tunnel.model import (
    BASE_AND_STREAM,
    CLOSE,
    CLOSING,
    OPEN,
    STAGE_BASE,
    STAGE_STREAM,
    STREAM,
    TERMINATED,
    ChannelState,
    TunnelState,
)
from airflow_tablestore.emulator.tunnel.shared import SharedState

log = logging.getLogger(__name__)


def _sanitize_partition(pid: str) -> str:
    return pid.replace("_", "-") or "p"


class ChannelScheduling:
    """Who reads which channel: heartbeats, manual schedule, stage changes and channels for new partitions."""

    def __init__(self, state: SharedState, clients: ClientRegistry, expiry: TunnelExpiry) -> None:
        self.state = state
        self.clients = clients
        self.expiry = expiry

    def heartbeat(self, tunnel_id: str, client_id: str,
                  reported: Iterable[tuple[str, int, str]]) -> list[ChannelState]:
        """Apply the client's reported channel states, rebalance, return its OPEN/CLOSING channels."""
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            now = self.state.clock.now_us()
            self.clients.reap(now, tunnel_id)
            client = self.clients.live_client(tunnel, client_id, now)
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
                for ch in self.sync_partitions(tunnel):
                    changed[ch.channel_id] = ch
            self.advance_stage(tunnel)
            if self.expiry.check(tunnel):
                self.state.repo.save(channels=[(tunnel_id, c) for c in changed.values()], clients=[client])
                raise tunnel_expired()
            live = sum(1 for c in self.state.clients.values() if c.tunnel_id == tunnel.tunnel_id)
            for ch in rebalance(tunnel, client_id, live):
                changed[ch.channel_id] = ch
            self.state.repo.save(channels=[(tunnel_id, c) for c in changed.values()], clients=[client])
            return [c for c in tunnel.channels.values()
                    if c.owner == client_id and c.status in (OPEN, CLOSING)]

    def schedule(self, tunnel_id: str, requested: Iterable[tuple[str, str]]) -> None:
        """Manual control: OPEN resumes, CLOSING suspends (takes the channel back), TERMINATED ends it."""
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            items = list(requested)
            for channel_id, _ in items:
                self.state.channel(tunnel, channel_id)
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
            self.state.repo.save(channels=changed)
            self.advance_stage(tunnel)

    def advance_stage(self, tunnel: TunnelState) -> None:
        """Move a tunnel whose base data is done to its next stage (and drop its snapshot)."""
        if tunnel.stage != STAGE_BASE or not tunnel.base_done():
            return
        if tunnel.tunnel_type == BASE_AND_STREAM:
            tunnel.stage = STAGE_STREAM
            log.info("tunnel %s: base data done, stream phase starts", tunnel.tunnel_name)
        snapshot_id, tunnel.snapshot_id = tunnel.snapshot_id, None
        self.state.repo.save(tunnels=[tunnel])
        self.state.drop_snapshot(snapshot_id)  # once no stored tunnel refers to it

    def sync_partitions(self, tunnel: TunnelState) -> list[ChannelState]:
        """Create channels for stream partitions this tunnel has not seen yet (e.g. split children)."""
        if self.state.stream_gone(tunnel):
            return []
        known = {c.partition_id for c in tunnel.channels.values() if c.is_stream}
        created: list[ChannelState] = []
        ordinal = len(tunnel.channels)
        for part in self.state.store.stream.partitions(tunnel.table_name):
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
            if part.closed and not self.state.store.stream.read(tunnel.table_name, pid, tunnel.start_seq, 1):
                # A partition that was split before the tunnel's start point has nothing to deliver.
                ch.status, ch.ckpt_token = TERMINATED, tokens.FINISHED
            tunnel.channels[ch.channel_id] = ch
            created.append(ch)
            ordinal += 1
        return created
