"""The tunnel session: one client id's connect, heartbeats, lost-session detection and checkpoints, with the rules.

:class:`TunnelSession` is the one session of the package: :class:`~airflow_tablestore.client.tunnel.worker.TunnelWorker`
and :class:`~airflow_tablestore.client.tunnel.rounds.RoundSession` (the Spark consumer's driver, the streaming
source's planner) both connect, heartbeat and checkpoint through it, so one rule decides every failure:

* **Lost**: the server forgot the client (``OTSResourceGone``), or no heartbeat succeeded for the client
  timeout → :class:`SessionLostError`; the owner reconnects with a new client id and replays what was not
  checkpointed. No Shutdown is sent for a lost client.
* **Fatal**: an error no retry can fix (:meth:`RetryPolicy.is_permanent
  <airflow_tablestore.client.retry.RetryPolicy.is_permanent>`: the tunnel expired or was deleted, a permission,
  a bad parameter) is raised at once, as the service's typed error.
* **Transient**: anything :class:`~airflow_tablestore.client.retry.RetryPolicy` retries. Connect and Checkpoint
  (not retried by the transport) are retried here with the session's policy (a Connect that landed leaves a
  client the server times out; a Checkpoint that landed is recognised by the sequence rule); a heartbeat is
  simply sent again at the next beat.

The rules both owners apply to channels:

* **Version rule** (:func:`merge_channels`): whoever changes a channel bumps its version; after a heartbeat
  the copy with the higher version wins, so a transition we reported and the server has not applied yet
  survives the answer, and channels the server no longer lists are no longer ours.
* **Reports** (:func:`report_for`): for a channel the server shows us OPEN or CLOSING we report TERMINATED
  once its data is finished (and its "finished" checkpoint stored), CLOSE once we release it (the server asked
  with CLOSING and nothing reads it any more, or we gave it up), else nothing; each report is version + 1.
* **Checkpoints** (:func:`store_checkpoint`): a checkpoint carries a sequence number that must be above the
  stored one; a mismatch is resolved by re-reading the stored checkpoint (ours after all, or someone else's).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_tablestore.client.errors import (
    ResourceGoneError,
    SequenceNumberMismatchError,
    TablestoreClientError,
    TablestoreError,
)
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient

log = logging.getLogger(__name__)

SESSION_RETRY = RetryPolicy(max_attempts=5, total_budget_s=30.0)
"""How Connect and Checkpoint are retried: a few attempts, within half a minute."""

ASSIGNED = (ChannelStatus.OPEN, ChannelStatus.CLOSING)
"""Statuses in which the server considers the channel this client's."""


def merge_channels(local: dict[str, Channel], remote: Iterable[Channel]) -> dict[str, Channel]:
    """The channels to keep after a heartbeat answer.

    Channels absent from ``remote`` are dropped. For the others a local copy with a *higher* version (a
    transition we reported and the server has not seen yet) wins; otherwise the server's copy does.
    """
    merged: dict[str, Channel] = {}
    for ch in remote:
        mine = local.get(ch.channel_id)
        merged[ch.channel_id] = mine if mine is not None and mine.version > ch.version else ch
    return merged


def transition(channel: Channel, status: ChannelStatus) -> Channel:
    """The local transition of ``channel`` to ``status`` (version + 1), to send in the next heartbeat."""
    return Channel(channel.channel_id, channel.version + 1, status)


def report_for(server: Channel, *, finished: bool, release: bool) -> Channel | None:
    """The transition to report for ``server`` (the merged view of one channel), or None to keep it as is.

    ``finished``: its data is consumed and the "finished" checkpoint stored → TERMINATED. ``release``: we give
    it back (the server asked with CLOSING and no read is in flight, or the consumer stopped) → CLOSE.
    Channels not assigned to us (CLOSE, TERMINATED) are never reported.
    """
    if server.status not in ASSIGNED:
        return None
    if finished:
        return transition(server, ChannelStatus.TERMINATED)
    if release:
        return transition(server, ChannelStatus.CLOSE)
    return None


class CheckpointOutcome(enum.Enum):
    STORED = "stored"
    """Our token is stored with our sequence number (or was already: a retried attempt that had landed)."""
    MOVED = "moved"
    """Someone stored another checkpoint since we read it: ours is not stored."""
    GONE = "gone"
    """The channel is no longer ours (taken over, or our client timed out)."""


@dataclass(frozen=True)
class CheckpointResult:
    outcome: CheckpointOutcome
    stored_token: str
    stored_sequence: int
    error: ResourceGoneError | None = None
    """For GONE: the server's answer (code, message, request id)."""


def store_checkpoint(client: TunnelClient, tunnel_id: str, client_id: str, channel_id: str, token: str,
                     sequence: int) -> CheckpointResult:
    """Store ``token`` with ``sequence`` (the stored number + 1), exactly once.

    On ``OTSSequenceNumberNotMatch`` the stored checkpoint is re-read: if it is our token, an earlier attempt
    landed (STORED); otherwise someone else moved the channel (MOVED, with their token and number). Never
    re-sent under another number. Network errors and 5xx propagate: the caller decides whether to retry.
    """
    try:
        client.checkpoint(tunnel_id, client_id, channel_id, token, sequence)
        return CheckpointResult(CheckpointOutcome.STORED, token, sequence)
    except SequenceNumberMismatchError:
        stored_token, stored_sequence = client.get_checkpoint(tunnel_id, client_id, channel_id)
        outcome = CheckpointOutcome.STORED if stored_token == token else CheckpointOutcome.MOVED
        return CheckpointResult(outcome, stored_token, stored_sequence)
    except ResourceGoneError as exc:
        return CheckpointResult(CheckpointOutcome.GONE, "", -1, exc)


class SessionLostError(TablestoreClientError):
    """The tunnel client timed out or the server forgot it: reconnect (a new client id) and replay what was not
    checkpointed."""

    def __init__(self, message: str, code: str = "OTSTunnelSessionLost", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


class TunnelSession:
    """One client id of tunnel ``tunnel_id``: connect, heartbeat, lost and fatal errors, checkpoints, shutdown.

    ``client_timeout_s`` is sent at Connect (the server drops a client silent for that long) and is the local
    watchdog: with no successful heartbeat for that long the session is lost. The owner decides when to beat
    and what to report; the session decides what each failure means (the module's rules).
    """

    def __init__(self, client: TunnelClient, tunnel_id: str, *, client_timeout_s: float,
                 client_tag: str | None = None, retry: RetryPolicy = SESSION_RETRY) -> None:
        self.client = client
        self.tunnel_id = tunnel_id
        self.client_timeout_s = client_timeout_s
        self.client_tag = client_tag
        self.retry = retry
        self.client_id = ""
        self._last_ok = 0.0
        self._lost: BaseException | None = None
        self._fatal: TablestoreError | None = None

    def __repr__(self) -> str:
        return f"TunnelSession(tunnel_id={self.tunnel_id!r}, client_id={self.client_id!r})"

    # -- what a failure means ---------------------------------------------------------------------------
    def is_fatal(self, error: BaseException) -> bool:
        """An error no retry or reconnect can fix (the tunnel expired or was deleted, a permission, ...)."""
        return self.retry.is_permanent(error)

    @property
    def lost(self) -> bool:
        return self._lost is not None

    @property
    def fatal(self) -> TablestoreError | None:
        """The fatal error a heartbeat met, if any."""
        return self._fatal

    def mark_lost(self, exc: BaseException) -> None:
        """Record that the server forgot this client (no Shutdown is sent on :meth:`shutdown`)."""
        if self._lost is None:
            self._lost = exc

    def check(self) -> None:
        """Raise the fatal error, or :class:`SessionLostError`, when the session can no longer be trusted."""
        if self._fatal is not None:
            raise self._fatal
        if self._lost is not None:
            raise SessionLostError(f"tunnel client {self.client_id} of tunnel {self.tunnel_id} lost: {self._lost}")

    # -- lifecycle -------------------------------------------------------------------------------------------
    def connect(self) -> str:
        """Connect (a new client id), retrying transient failures. A fatal error is raised as it is; transient
        failures that outlast the retries raise :class:`SessionLostError` (the owner tries again later)."""
        try:
            self.client_id = self.retry.run(
                lambda: self.client.connect(self.tunnel_id, timeout_s=max(1, round(self.client_timeout_s)),
                                            client_tag=self.client_tag),
                idempotent=True, name=f"connect to tunnel {self.tunnel_id}")
        except TablestoreError as exc:
            if self.is_fatal(exc):
                raise
            raise SessionLostError(f"could not connect to tunnel {self.tunnel_id}: {exc}") from exc
        self._last_ok = time.monotonic()
        self._lost = self._fatal = None
        log.info("tunnel %s: connected as client %s", self.tunnel_id, self.client_id)
        return self.client_id

    def heartbeat(self, channels: Iterable[Channel]) -> list[Channel] | None:
        """Report ``channels``; the server's answer, or None after a transient failure (beat again later).

        Raises :class:`SessionLostError` when the server forgot the client or no heartbeat succeeded for the
        client timeout, and a fatal error as it is (also kept: :meth:`check` raises it again)."""
        self.check()
        try:
            answer = self.client.heartbeat(self.tunnel_id, self.client_id, channels)
        except ResourceGoneError as exc:
            self.mark_lost(exc)
            raise SessionLostError(f"tunnel client {self.client_id} was dropped by the server: {exc}") from exc
        except TablestoreError as exc:
            if self.is_fatal(exc):
                self._fatal = exc
                raise
            silent = time.monotonic() - self._last_ok
            if silent > self.client_timeout_s:
                self.mark_lost(exc)
                raise SessionLostError(f"no successful heartbeat of tunnel client {self.client_id} for "
                                       f"{self.client_timeout_s:g}s; last error: {exc}") from exc
            log.warning("tunnel %s: heartbeat failed (%s); trying again at the next beat", self.tunnel_id, exc)
            return None
        self._last_ok = time.monotonic()
        return answer

    def shutdown(self, *, notify: bool = True) -> None:
        """Leave the tunnel: the Shutdown RPC (the server releases the client's channels at once), unless the
        client is lost or ``notify`` is False (then the server times the client out)."""
        client_id, self.client_id = self.client_id, ""
        if not client_id or not notify or self._lost is not None:
            return
        try:
            self.client.shutdown(self.tunnel_id, client_id)
            log.info("tunnel %s: client %s shut down", self.tunnel_id, client_id)
        except TablestoreError as exc:
            log.info("tunnel %s: shutdown of client %s failed (%s); the server will time it out", self.tunnel_id,
                     client_id, exc)

    # -- checkpoints ---------------------------------------------------------------------------------------
    def get_checkpoint(self, channel_id: str) -> tuple[str, int]:
        """The channel's stored ``(token, sequence)`` (``OTSResourceGone``: the channel is not ours)."""
        return self.client.get_checkpoint(self.tunnel_id, self.client_id, channel_id)

    def store(self, channel_id: str, token: str, sequence: int) -> CheckpointResult:
        """:func:`store_checkpoint` under this client id, transient failures retried with the session's policy
        (the sequence rule makes a repeated attempt safe: one that had landed reads back as STORED)."""
        return self.retry.run(
            lambda: store_checkpoint(self.client, self.tunnel_id, self.client_id, channel_id, token, sequence),
            idempotent=True, name=f"checkpoint of channel {channel_id}")
