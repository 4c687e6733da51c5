"""Driver side of the tunnel protocol: one client, a heartbeat thread, the channel state machine, checkpoints.

The driver is the only tunnel client: executors read with its client id. Channel transitions follow the
protocol's version rule (whoever changes a channel bumps its version; the higher version wins on merge):
finished channels are reported TERMINATED, channels the server wants back (CLOSING) are reported CLOSE once
no round is reading them. If heartbeats fail for longer than the client timeout, or the server forgets the
client, the session is *lost*: the driver must not checkpoint the round in flight and reconnects.
"""

from __future__ import annotations

import logging
import threading
import time

from airflow_tablestore.client.backoff import TUNNEL_SESSION_RETRY
from airflow_tablestore.client.errors import (
    ResourceGoneError,
    ServerError,
    TablestoreError,
    TablestoreNetworkError,
    is_transient,
)
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.session import (
    CheckpointOutcome,
    merge_channels,
    report_for,
    store_checkpoint,
    transition,
)

log = logging.getLogger(__name__)


COMMIT_ATTEMPTS = 5
CONNECT_ATTEMPTS = 5


class SessionLostError(RuntimeError):
    """The tunnel client timed out or was forgotten by the server; reconnect and replay the round."""


class TunnelSession:
    """A connected tunnel client with a background heartbeat. Use as a context manager."""

    def __init__(
        self,
        client: TunnelClient,
        tunnel_id: str,
        *,
        heartbeat_interval: float = 5.0,
        client_timeout: int = 60,
        client_tag: str | None = None,
    ) -> None:
        self.client = client
        self.tunnel_id = tunnel_id
        self.heartbeat_interval = heartbeat_interval
        self.client_timeout = client_timeout
        self.client_tag = client_tag
        self.client_id = ""
        self._channels: dict[str, Channel] = {}
        self._finished: set[str] = set()
        self._busy: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: BaseException | None = None
        self._last_ok = 0.0

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> TunnelSession:
        self.client_id = self.connect()
        log.info("connected to tunnel %s as client %s", self.tunnel_id, self.client_id)
        self.heartbeat()
        self._thread = threading.Thread(target=self._beat, name="tunnel-heartbeat", daemon=True)
        self._thread.start()
        return self

    def connect(self) -> str:
        """Connect, retrying transient failures (a Connect that timed out but landed leaves a client that
        never heartbeats: the server times it out and hands its channels on)."""
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                return self.client.connect(self.tunnel_id, timeout_s=self.client_timeout, client_tag=self.client_tag)
            except TablestoreError as exc:
                if attempt == CONNECT_ATTEMPTS or not is_transient(exc):
                    raise
                # attempt is 1-based here: the first retry waits 0.4 s (as before)
                delay = TUNNEL_SESSION_RETRY.delay(attempt)
                log.warning("connect to tunnel %s failed (%s); retry %d of %d in %.1fs", self.tunnel_id, exc,
                            attempt, CONNECT_ATTEMPTS - 1, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop heartbeating and leave the tunnel (the server releases unfinished channels)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_interval + 30)
        if self.client_id and self._lost is None:
            try:
                self.client.shutdown(self.tunnel_id, self.client_id)
                log.info("tunnel client %s shut down", self.client_id)
            except TablestoreError as exc:
                log.warning("tunnel shutdown failed (the server will time the client out): %s", exc)

    def __enter__(self) -> TunnelSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- heartbeat ----------------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            try:
                self.heartbeat()
            except ResourceGoneError as exc:
                self._lost = exc
                log.error("tunnel client %s was dropped by the server: %s", self.client_id, exc)
                return
            except Exception as exc:  # noqa: BLE001 - keep beating; give up only after the timeout
                log.warning("tunnel heartbeat failed: %s", exc)
                if time.monotonic() - self._last_ok > self.client_timeout:
                    self._lost = exc
                    log.error("no successful heartbeat for %ss: the session is lost", self.client_timeout)
                    return

    def heartbeat(self) -> dict[str, Channel]:
        """Send local channel states, merge the server's answer, apply local transitions; returns the map."""
        with self._lock:
            response = self.client.heartbeat(self.tunnel_id, self.client_id, list(self._channels.values()))
            self._last_ok = time.monotonic()
            merged = merge_channels(self._channels, response)
            for cid, ch in list(merged.items()):
                current = self._channels.get(cid)
                if current is not None and current.version > ch.version:
                    continue  # our transition is pending (the merge kept it): not decided again
                report = report_for(ch, finished=cid in self._finished,
                                    release=ch.status == ChannelStatus.CLOSING and cid not in self._busy)
                if report is not None:
                    merged[cid] = report
                    if report.status == ChannelStatus.CLOSE:
                        log.info("channel %s released at the server's request", cid)
            self._channels = merged
            return dict(merged)

    def check(self) -> None:
        """Raise :class:`SessionLostError` when the session can no longer be trusted."""
        if self._lost is not None:
            raise SessionLostError(f"tunnel client {self.client_id} lost: {self._lost}")

    def mark_lost(self, exc: BaseException) -> None:
        """Record that the server forgot this client (no Shutdown is sent on close)."""
        self._lost = exc

    @property
    def lost(self) -> bool:
        return self._lost is not None

    # -- channels -----------------------------------------------------------------------------------
    def open_channels(self) -> list[str]:
        """Channels assigned OPEN to this client and not finished locally, in a stable order."""
        with self._lock:
            return sorted(
                cid for cid, ch in self._channels.items()
                if ch.status == ChannelStatus.OPEN and cid not in self._finished
            )

    def begin_round(self, channel_ids: list[str]) -> None:
        with self._lock:
            self._busy = set(channel_ids)

    def end_round(self) -> None:
        with self._lock:
            self._busy = set()

    def mark_finished(self, channel_id: str) -> None:
        """Report the channel TERMINATED on the next heartbeat (its "finished" checkpoint is stored)."""
        with self._lock:
            self._finished.add(channel_id)
            ch = self._channels.get(channel_id)
            if ch is not None and ch.status in (ChannelStatus.OPEN, ChannelStatus.CLOSING):
                self._channels[channel_id] = transition(ch, ChannelStatus.TERMINATED)

    # -- checkpoints --------------------------------------------------------------------------------
    def get_checkpoint(self, channel_id: str) -> tuple[str, int]:
        return self.client.get_checkpoint(self.tunnel_id, self.client_id, channel_id)

    def commit(self, channel_id: str, start_token: str, sequence: int, next_token: str) -> bool:
        """Store ``next_token`` with ``sequence + 1`` (the sink already holds everything before it). Returns False
        when the channel was checkpointed by someone else or taken away (its records will be replayed; the
        sinks are idempotent).

        A network error or 5xx is retried (``COMMIT_ATTEMPTS`` times, with backoff): the sequence number makes
        a repeated checkpoint safe, since an attempt that did land answers "sequence mismatch" with our token.
        """
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return self._commit_once(channel_id, start_token, sequence, next_token)
            except (TablestoreNetworkError, ServerError) as exc:
                if attempt == COMMIT_ATTEMPTS:
                    raise
                delay = TUNNEL_SESSION_RETRY.delay(attempt - 1)
                log.warning("checkpoint of channel %s failed (%s); retry %d of %d in %.1fs", channel_id, exc,
                            attempt, COMMIT_ATTEMPTS - 1, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _commit_once(self, channel_id: str, start_token: str, sequence: int, next_token: str) -> bool:
        result = store_checkpoint(self.client, self.tunnel_id, self.client_id, channel_id, next_token, sequence + 1)
        if result.outcome is CheckpointOutcome.STORED:
            return True
        if result.outcome is CheckpointOutcome.GONE:
            log.warning("channel %s is no longer ours, not checkpointed (will be replayed): %s", channel_id,
                        result.error)
            return False
        # Someone else stored a checkpoint since this round was planned (perhaps the same token again): keep
        # theirs and replay the round. Never re-commit under another sequence number: the Parquet sink's staged
        # output is named by the one planned, and the replay is idempotent.
        log.warning("channel %s was checkpointed by another consumer (now %s at sequence %d); keeping its "
                    "checkpoint, the round will be replayed", channel_id,
                    "our start token" if result.stored_token == start_token else "a different token",
                    result.stored_sequence)
        return False
