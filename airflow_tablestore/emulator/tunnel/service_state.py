"""Shared state of the tunnel control plane: the lock, tunnels and clients, lookups, and the parts' hooks.

All state lives in memory under one lock (``self.lock``, re-entrant) and is written through to SQLite
(:mod:`.persistence`). :class:`ServiceState` restores it at start; the parts of the control plane are mixins
over it, one module each (:mod:`.clients`, :mod:`.scheduling`, :mod:`.checkpoints`, :mod:`.expiry`,
:mod:`.lifecycle`), composed by :class:`~.service.TunnelService`. A part that needs another part's step
calls it through the hooks declared here; every public method takes the lock.
"""

from __future__ import annotations

import logging
import threading

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.tunnel.errors import tunnel_not_exist
from airflow_tablestore.emulator.tunnel.persistence import TunnelRepository
from airflow_tablestore.emulator.tunnel.state import ChannelState, ClientState, TunnelState
from airflow_tablestore.emulator.tunnel.store_api import StoreAPI

log = logging.getLogger("airflow_tablestore.emulator.tunnel.service")  # the service's public module name


class ServiceState:
    """Tunnels and clients (restored from the store), the lock that guards them, and lookups."""

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

    @staticmethod
    def _channel(tunnel: TunnelState, channel_id: str) -> ChannelState:
        channel = tunnel.channels.get(channel_id)
        if channel is None:
            raise parameter_invalid(f"channel not exist: {channel_id}")
        return channel

    def _stream_gone(self, tunnel: TunnelState) -> bool:
        """The table (or its stream) this tunnel reads was deleted or re-created since the tunnel was made."""
        info = self.store.get_table_info(tunnel.table_name)
        return info is None or getattr(info, "stream_id", None) != tunnel.stream_id

    # ================================================================ hooks implemented by the parts ====
    def _live_client(self, tunnel: TunnelState, client_id: str, now_us: int) -> ClientState:
        """The client, if it belongs to the tunnel and is alive (:mod:`.clients`)."""
        raise NotImplementedError

    def _reap(self, now_us: int, tunnel_id: str | None = None) -> None:
        """Drop clients whose heartbeat timed out (:mod:`.clients`)."""
        raise NotImplementedError

    def _check_expiry(self, tunnel: TunnelState) -> bool:
        """Whether the tunnel is (now) expired (:mod:`.expiry`)."""
        raise NotImplementedError

    def _sync_partitions(self, tunnel: TunnelState) -> list[ChannelState]:
        """Create channels for stream partitions not seen yet (:mod:`.scheduling`)."""
        raise NotImplementedError

    def _advance_stage(self, tunnel: TunnelState) -> None:
        """Move a tunnel whose base data is done to its next stage (:mod:`.scheduling`)."""
        raise NotImplementedError

    def _drop_snapshot(self, tunnel: TunnelState) -> None:
        """Drop the tunnel's base-data snapshot, if any (:mod:`.lifecycle`)."""
        raise NotImplementedError
