"""``RoundSession``: a tunnel session whose channels are read in rounds, elsewhere (the Spark consumer's driver and
the streaming source's planner).

The driver is the only tunnel client: Spark tasks read with its client id. It holds one
:class:`~airflow_tablestore.client.tunnel.session.TunnelSession` (connect, heartbeats, lost and fatal errors,
checkpoints) beating in a background thread, and the channel book: finished channels are reported TERMINATED,
channels the server wants back (CLOSING) are reported CLOSE once no round is reading them. A round read under
a lost client id is never checkpointed (:meth:`TunnelSession.check`).
"""

from __future__ import annotations

import logging
import threading

from airflow_tablestore.client.errors import TablestoreError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.session import (
    CheckpointOutcome,
    SessionLostError,
    TunnelSession,
    merge_channels,
    report_for,
    transition,
)

log = logging.getLogger(__name__)


class RoundSession:
    """A connected tunnel client with a background heartbeat and the channel book. Use as a context manager."""

    def __init__(self, client: TunnelClient, tunnel_id: str, *, heartbeat_interval: float = 5.0,
                 client_timeout: int = 60, client_tag: str | None = None) -> None:
        self.tunnel = TunnelSession(client, tunnel_id, client_timeout_s=client_timeout, client_tag=client_tag)
        self.heartbeat_interval = heartbeat_interval
        self._channels: dict[str, Channel] = {}
        self._finished: set[str] = set()
        self._busy: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def client_id(self) -> str:
        return self.tunnel.client_id

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> RoundSession:
        """Connect, take the first channel assignment, and beat in the background."""
        self.tunnel.connect()
        self.heartbeat()
        self._thread = threading.Thread(target=self._beat, name="tunnel-heartbeat", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop heartbeating and leave the tunnel (the server releases unfinished channels)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_interval + 30)
        self.tunnel.shutdown()

    def __enter__(self) -> RoundSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- heartbeat ----------------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            try:
                self.heartbeat()
            except SessionLostError as exc:
                log.error("%s", exc)
                return
            except TablestoreError as exc:  # fatal: kept by the session, raised again by its check()
                log.error("tunnel heartbeat stopped: %s", exc)
                return
            except Exception as exc:  # noqa: BLE001 - a bug: the session can no longer be trusted
                self.tunnel.mark_lost(exc)
                log.exception("tunnel heartbeat failed")
                return

    def heartbeat(self) -> dict[str, Channel]:
        """Send local channel states, merge the server's answer, apply local transitions; returns the map
        (unchanged after a transient failure). Raises what :meth:`TunnelSession.heartbeat` raises."""
        with self._lock:
            response = self.tunnel.heartbeat(list(self._channels.values()))
            if response is None:
                return dict(self._channels)
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
    def commit(self, channel_id: str, start_token: str, sequence: int, next_token: str) -> bool:
        """Store ``next_token`` with ``sequence + 1`` (the sink already holds everything before it). Returns False
        when the channel was checkpointed by someone else or taken away (its records will be replayed; the
        sinks are idempotent). Transient failures are retried by the session."""
        result = self.tunnel.store(channel_id, next_token, sequence + 1)
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
