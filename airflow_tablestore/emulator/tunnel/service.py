"""The tunnel service's control plane: :class:`TunnelService` wires its parts over one :class:`SharedState`.

All state lives in memory under one lock and is written through to SQLite (:mod:`.persistence`). Client
liveness is evaluated lazily on every request against the emulator clock (deterministic, time-travel aware,
restart safe). The data path (ReadRecords) is in :mod:`.reader`. Each part holds the shared state and the
parts it calls, by name:

* ``state`` (:mod:`.shared`) – the lock, tunnels and clients, lookups, snapshot clean-up;
* ``expiry`` (:mod:`.expiry`) – tunnels whose stream positions fell behind the retained stream log;
* ``clients`` (:mod:`.clients`) – connect, shutdown, heartbeat timeouts and reaping (uses ``expiry``);
* ``scheduling`` (:mod:`.scheduling`) – heartbeats, rebalancing, manual schedule, stages, channels for new
  partitions (uses ``clients``, ``expiry``);
* ``checkpoints`` (:mod:`.checkpoints`) – checkpoints and ReadRecords grants (uses ``clients``);
* ``lifecycle`` (:mod:`.lifecycle`) – create, list, describe and delete tunnels (uses ``clients``,
  ``scheduling``, ``expiry``).
"""

from __future__ import annotations

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.tunnel.checkpoints import ChannelCheckpoints
from airflow_tablestore.emulator.tunnel.clients import ClientRegistry
from airflow_tablestore.emulator.tunnel.expiry import TunnelExpiry
from airflow_tablestore.emulator.tunnel.lifecycle import TunnelLifecycle
from airflow_tablestore.emulator.tunnel.scheduling import ChannelScheduling
from airflow_tablestore.emulator.tunnel.shared import SharedState


class TunnelService:
    """Tunnel control plane over the emulator :class:`Store` (restores persisted state). Thread safe."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.state = SharedState(store, clock, config)
        self.expiry = TunnelExpiry(self.state)
        self.clients = ClientRegistry(self.state, self.expiry)
        self.scheduling = ChannelScheduling(self.state, self.clients, self.expiry)
        self.checkpoints = ChannelCheckpoints(self.state, self.clients)
        self.lifecycle = TunnelLifecycle(self.state, self.clients, self.scheduling, self.expiry)
