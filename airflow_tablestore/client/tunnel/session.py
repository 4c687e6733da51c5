"""The tunnel-session rules shared by the tunnel worker and the Spark driver: versions, reports, checkpoints.

:class:`~airflow_tablestore.client.tunnel.worker.TunnelWorker` and the Spark driver both apply the channel
version rule, what a client reports for a channel, and the checkpoint rule:

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
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_tablestore.client.errors import ResourceGoneError, SequenceNumberMismatchError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient

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
