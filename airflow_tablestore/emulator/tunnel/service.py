"""The tunnel service's control plane: :class:`TunnelService` composes its parts over one shared state.

All state lives in memory under one lock and is written through to SQLite (:mod:`.persistence`). Client
liveness is evaluated lazily on every request against the emulator clock (deterministic, time-travel aware,
restart safe). The data path (ReadRecords) is in :mod:`.reader`. One module per part:

* :mod:`.service_state` – the state (tunnels, clients, lock), lookups and the hooks between the parts;
* :mod:`.lifecycle` – create, list, describe and delete tunnels;
* :mod:`.clients` – connect, shutdown, heartbeat timeouts and reaping;
* :mod:`.scheduling` – heartbeats, rebalancing calls, manual schedule, stages, channels for new partitions;
* :mod:`.checkpoints` – checkpoints and ReadRecords grants;
* :mod:`.expiry` – tunnels whose stream positions fell behind the retained stream log.
"""

from __future__ import annotations

from airflow_tablestore.emulator.tunnel.checkpoints import ChannelCheckpoints, ReadGrant
from airflow_tablestore.emulator.tunnel.clients import (
    DEFAULT_CLIENT_TIMEOUT_S,
    MAX_CLIENT_TIMEOUT_S,
    ClientRegistry,
)
from airflow_tablestore.emulator.tunnel.expiry import TunnelExpiry
from airflow_tablestore.emulator.tunnel.lifecycle import ChannelView, TunnelLifecycle
from airflow_tablestore.emulator.tunnel.scheduling import ChannelScheduling


class TunnelService(TunnelLifecycle, ChannelScheduling, ClientRegistry, ChannelCheckpoints, TunnelExpiry):
    """Tunnel control plane over the emulator :class:`Store`. Thread safe."""


__all__ = ["DEFAULT_CLIENT_TIMEOUT_S", "MAX_CLIENT_TIMEOUT_S", "ChannelView", "ReadGrant", "TunnelService"]
