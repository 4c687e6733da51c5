"""Channel assignment: eligibility (stage, split parents) and even rebalancing over live clients.

Pure functions over :class:`TunnelState`; the caller holds the service lock and persists what changed.
"""

from __future__ import annotations

import math

from airflow_tablestore.emulator.tunnel.model import (
    CLOSE,
    CLOSING,
    OPEN,
    TERMINATED,
    WAIT,
    ChannelState,
    TunnelState,
)


def eligible(tunnel: TunnelState, ch: ChannelState, base_done: bool) -> bool:
    """May the channel be assigned now? (not TERMINATED/suspended; stream: base done and parents done)"""
    if ch.status == TERMINATED or ch.suspended:
        return False
    if not ch.is_stream:
        return True
    return base_done and parents_done(tunnel, ch)


def parents_done(tunnel: TunnelState, ch: ChannelState) -> bool:
    """True when every parent partition's channel (if this tunnel has one) is TERMINATED."""
    if not ch.parent_ids:
        return True
    by_partition = {c.partition_id: c for c in tunnel.channels.values() if c.is_stream}
    return all(by_partition[p].status == TERMINATED for p in ch.parent_ids if p in by_partition)


def rebalance(tunnel: TunnelState, client_id: str, live: int) -> list[ChannelState]:
    """target = ceil(active / live clients): shed extras (OPEN → CLOSING) or take free channels
    (→ OPEN)."""
    base_done = tunnel.base_done()
    active = [c for c in tunnel.channels.values() if eligible(tunnel, c, base_done)]
    if not active or live == 0:
        return []
    target = math.ceil(len(active) / live)
    mine = [c for c in active if c.owner == client_id]
    opened = [c for c in mine if c.status == OPEN]
    changed: list[ChannelState] = []
    if len(opened) > target:
        for ch in opened[target:]:
            ch.status, ch.version = CLOSING, ch.version + 1
            changed.append(ch)
        return changed
    room = target - len(mine)
    for ch in active:
        if room <= 0:
            break
        if ch.owner is None and ch.status in (WAIT, CLOSE):
            ch.status, ch.version, ch.owner = OPEN, ch.version + 1, client_id
            changed.append(ch)
            room -= 1
    return changed
