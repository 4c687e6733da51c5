"""Tunnel clients and their liveness: connect, shutdown, heartbeat timeouts and the reaping of dead clients.

Liveness is evaluated lazily on every request against the emulator clock (deterministic, time-travel aware,
restart safe): a client whose last heartbeat is older than its timeout is dropped and its channels are
released (CLOSE, version + 1) for the next rebalance.
"""

from __future__ import annotations

import logging
import uuid

from airflow_tablestore.emulator.tunnel.errors import resource_gone, tunnel_expired
from airflow_tablestore.emulator.tunnel.expiry import TunnelExpiry
from airflow_tablestore.emulator.tunnel.model import (
    CLOSE,
    CLOSING,
    OPEN,
    ChannelState,
    ClientState,
    TunnelState,
)
from airflow_tablestore.emulator.tunnel.shared import SharedState

log = logging.getLogger(__name__)

DEFAULT_CLIENT_TIMEOUT_S = 300
MAX_CLIENT_TIMEOUT_S = 7 * 24 * 3600


class ClientRegistry:
    """Connected clients: registration, liveness checks and release of a dropped client's channels."""

    def __init__(self, state: SharedState, expiry: TunnelExpiry) -> None:
        self.state = state
        self.expiry = expiry

    def live_client(self, tunnel: TunnelState, client_id: str, now_us: int) -> ClientState:
        """The client, if it belongs to the tunnel and is alive; a timed-out client is dropped (410)."""
        client = self.state.clients.get(client_id)
        if client is None or client.tunnel_id != tunnel.tunnel_id:
            raise resource_gone("client not exist or heartbeat timed out; reconnect with the tunnel id")
        if client.expired(now_us):
            self._drop_client(client, reason="heartbeat timeout")
            raise resource_gone("Tunnel Client heartbeat timeout; reconnect with the tunnel id")
        return client

    def _drop_client(self, client: ClientState, *, reason: str) -> None:
        """Release the client's channels (CLOSE, version+1) and forget it."""
        self.state.clients.pop(client.client_id, None)
        tunnel = self.state.tunnels.get(client.tunnel_id)
        changed: list[tuple[str, ChannelState]] = []
        if tunnel is not None:
            for ch in tunnel.channels.values():
                if ch.owner == client.client_id:
                    ch.owner = None
                    if ch.status in (OPEN, CLOSING):
                        ch.status = CLOSE
                        ch.version += 1
                    changed.append((tunnel.tunnel_id, ch))
        self.state.repo.save(channels=changed, deleted_clients=[client.client_id])
        log.info("tunnel client %s dropped (%s); released %d channel(s)", client.client_id, reason,
                 len(changed))

    def reap(self, now_us: int, tunnel_id: str | None = None) -> None:
        """Drop clients whose heartbeat timed out (of one tunnel, or of all)."""
        for client in list(self.state.clients.values()):
            if (tunnel_id is None or client.tunnel_id == tunnel_id) and client.expired(now_us):
                self._drop_client(client, reason="heartbeat timeout")

    def connect(self, tunnel_id: str, timeout_s: int | None, client_tag: str | None) -> str:
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            if self.expiry.check(tunnel):
                raise tunnel_expired()
            timeout = int(timeout_s) if timeout_s and timeout_s > 0 else DEFAULT_CLIENT_TIMEOUT_S
            timeout = min(timeout, MAX_CLIENT_TIMEOUT_S)
            tag = (client_tag or "client").strip() or "client"
            client = ClientState(client_id=f"{tag}-{uuid.uuid4().hex[:16]}", tunnel_id=tunnel_id,
                                 timeout_s=timeout, last_seen_us=self.state.clock.now_us())
            self.state.clients[client.client_id] = client
            self.state.repo.save(clients=[client])
            log.info("tunnel %s: client %s connected (timeout %ss)", tunnel.tunnel_name, client.client_id,
                     timeout)
            return client.client_id

    def shutdown(self, tunnel_id: str, client_id: str) -> None:
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            client = self.live_client(tunnel, client_id, self.state.clock.now_us())
            self._drop_client(client, reason="shutdown")
