"""Expiry of tunnels: a stream position that fell behind the retained stream log expires its tunnel.

Expiry is sticky (persisted) and checked lazily: when tunnels are listed or described, when a client connects
or heartbeats, and by the data path when a ReadRecords position turns out to be trimmed. A tunnel whose table
or stream was deleted or re-created expires too.
"""

from __future__ import annotations

import logging

from airflow_tablestore.emulator.tunnel.model import TERMINATED, TunnelState
from airflow_tablestore.emulator.tunnel.shared import SharedState

log = logging.getLogger(__name__)


class TunnelExpiry:
    """Detect and record that a tunnel's stream positions are no longer readable."""

    def __init__(self, state: SharedState) -> None:
        self.state = state

    def check(self, tunnel: TunnelState) -> bool:
        """Mark (sticky) and return whether a stream position fell behind the retained stream log."""
        if tunnel.expired:
            return True
        if not tunnel.has_stream:
            return False
        if self.state.stream_gone(tunnel) and any(c.is_stream and c.status != TERMINATED
                                                  for c in tunnel.channels.values()):
            self.mark_expired(tunnel)
            return True
        for ch in tunnel.channels.values():
            if ch.is_stream and ch.status != TERMINATED and self.position_expired(
                    tunnel.table_name, ch.partition_id, ch.ckpt_rpo_ns):
                self.mark_expired(tunnel)
                return True
        return False

    def position_expired(self, table: str, partition_id: str, consumed_ns: int) -> bool:
        """True when records after ``consumed_ns`` may have been trimmed: the position is older than the
        retention horizon and not already at the partition's oldest retained record."""
        stream = self.state.store.stream
        horizon = stream.retention_start_us(table)
        if horizon is None or consumed_ns >= int(horizon) * 1000:
            return False
        oldest = stream.oldest_retained_us(table, partition_id)
        return oldest is None or consumed_ns < (int(oldest) - 1) * 1000

    def mark_expired(self, tunnel: TunnelState) -> None:
        with self.state.lock:
            if not tunnel.expired:
                tunnel.expired = True
                self.state.repo.save(tunnels=[tunnel])
                log.warning("tunnel %s expired: stream log retention passed its position", tunnel.tunnel_name)

    def expire_tunnel(self, tunnel_id: str) -> None:
        with self.state.lock:
            tunnel = self.state.tunnels.get(tunnel_id)
            if tunnel is not None:
                self.mark_expired(tunnel)
