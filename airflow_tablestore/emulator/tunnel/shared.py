"""The state the tunnel service's parts share: the lock, tunnels and clients, lookups and their storage.

All state lives in memory under one re-entrant lock (``SharedState.lock``) and is written through to SQLite
(:mod:`.persistence`); :class:`SharedState` restores it at start. The parts of the control plane
(:mod:`.clients`, :mod:`.scheduling`, :mod:`.checkpoints`, :mod:`.expiry`, :mod:`.lifecycle`) each hold this
one object and the parts they call; :class:`~.service.TunnelService` wires them. Every public method of a
part takes the lock.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.tunnel.errors import tunnel_not_exist
from airflow_tablestore.emulator.tunnel.model import ChannelState, TunnelState
from airflow_tablestore.emulator.tunnel.persistence import TunnelRepository

log = logging.getLogger(__name__)


class SharedState:
    """Tunnels and clients (restored from the store), the lock that guards them, and lookups."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.lock = threading.RLock()
        self.repo = TunnelRepository(store.db)
        self.tunnels, self.clients = self.repo.load()
        self.drop_orphan_snapshots()
        now = clock.now_us()
        # After a restart, every remembered client gets a full timeout from now before it is reaped.
        for client in self.clients.values():
            client.last_seen_us = max(client.last_seen_us, now)
        if self.tunnels:
            log.info("tunnel service restored %d tunnel(s), %d client(s)", len(self.tunnels),
                     len(self.clients))

    def tunnel_by_id(self, tunnel_id: str) -> TunnelState:
        tunnel = self.tunnels.get(tunnel_id)
        if tunnel is None:
            raise tunnel_not_exist()
        return tunnel

    def tunnel_by_name(self, table: str, name: str) -> TunnelState:
        for tunnel in self.tunnels.values():
            if tunnel.table_name == table and tunnel.tunnel_name == name:
                return tunnel
        raise tunnel_not_exist()

    @staticmethod
    def channel(tunnel: TunnelState, channel_id: str) -> ChannelState:
        channel = tunnel.channels.get(channel_id)
        if channel is None:
            raise parameter_invalid(f"channel not exist: {channel_id}")
        return channel

    def stream_gone(self, tunnel: TunnelState) -> bool:
        """The table (or its stream) this tunnel reads was deleted or re-created since the tunnel was made."""
        info = self.store.tables.get(tunnel.table_name)
        return info is None or info.stream_id != tunnel.stream_id

    def drop_snapshot(self, snapshot_id: int | None) -> None:
        """Drop a base-data snapshot no tunnel refers to any more (None: none), in the background: deleting its
        rows takes about a second per million and must not hold up the call that ended the base phase (one a
        crash left behind is dropped at the next start, :meth:`drop_orphan_snapshots`)."""
        if snapshot_id is not None:
            threading.Thread(target=self._drop, args=(snapshot_id,), name="drop-snapshot", daemon=True).start()

    def drop_orphan_snapshots(self) -> None:
        """Drop the snapshots no tunnel refers to (left by a crash during a background drop)."""
        used = {t.snapshot_id for t in self.tunnels.values() if t.snapshot_id is not None}
        for snapshot_id in set(self.store.snapshots.ids()) - used:
            self.drop_snapshot(snapshot_id)

    def _drop(self, snapshot_id: int) -> None:
        try:
            self.store.snapshots.drop(snapshot_id)
        except RuntimeError:  # the store closed first (shutdown): the next start drops it
            log.debug("snapshot %s not dropped: the store is closed", snapshot_id)
        except (EmulatorError, sqlite3.Error):
            log.warning("could not drop snapshot %s", snapshot_id, exc_info=True)
