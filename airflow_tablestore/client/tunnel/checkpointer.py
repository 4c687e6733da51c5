"""Per-channel checkpoints with the SDKs' sequence-number rule."""

from __future__ import annotations

import logging

from airflow_tablestore.client.errors import TablestoreError
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.session import CheckpointOutcome, store_checkpoint

log = logging.getLogger(__name__)


class Checkpointer:
    """Stores a channel's progress on the server.

    Starts at ``GetCheckpoint.sequence_number + 1`` and adds one per successful checkpoint. On
    ``OTSSequenceNumberNotMatch`` (another consumer raced us, or we were behind) it re-reads the server's
    number and continues from there + 1; the failed checkpoint is not re-sent (the next one supersedes it).
    """

    def __init__(self, client: TunnelClient, tunnel_id: str, client_id: str, channel_id: str,
                 sequence_number: int, token: str) -> None:
        self._client = client
        self._tunnel_id = tunnel_id
        self._client_id = client_id
        self._channel_id = channel_id
        self.sequence_number = sequence_number + 1
        self.last_token = token
        self.count = 0

    def checkpoint(self, token: str) -> bool:
        """Checkpoint ``token``; True when stored (or already stored). ``ResourceGoneError`` propagates:
        the channel is no longer ours."""
        if token == self.last_token:
            return True
        try:
            result = store_checkpoint(self._client, self._tunnel_id, self._client_id, self._channel_id, token,
                                      self.sequence_number)
        except TablestoreError as exc:
            log.warning(
                "channel %s: checkpoint failed (%s); will retry with the next one", self._channel_id, exc
            )
            return False
        if result.error is not None:  # GONE: the channel is no longer ours
            raise result.error
        if result.outcome is CheckpointOutcome.MOVED:
            log.warning("channel %s: checkpoint sequence number %d out of date, server has %d; resynced",
                        self._channel_id, self.sequence_number, result.stored_sequence)
            self.sequence_number = result.stored_sequence + 1
            return False
        self.sequence_number += 1
        self.last_token = token
        self.count += 1
        return True
