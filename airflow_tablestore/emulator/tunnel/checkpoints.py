"""Channel checkpoints of the tunnel control plane, and the read grants that check the same ownership.

Only the live client that holds a channel (OPEN or CLOSING) may commit its checkpoint or read it
(:meth:`ChannelCheckpoints.grant_read` copies what the data path, :mod:`.reader`, needs). Checkpoint
sequence numbers must increase; a "finished" token stands for the count and consume point the reader noted.
"""

from __future__ import annotations

from dataclasses import dataclass

import airflow_tablestore.emulator.tunnel.tokens as tokens
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.tunnel.clients import ClientRegistry
from airflow_tablestore.emulator.tunnel.errors import resource_gone, sequence_mismatch, tunnel_expired
from airflow_tablestore.emulator.tunnel.model import CLOSING, OPEN, ChannelState
from airflow_tablestore.emulator.tunnel.shared import SharedState


@dataclass(frozen=True, slots=True)
class ReadGrant:
    """What the data path needs to serve one ReadRecords call (a copy taken under the lock)."""

    tunnel_id: str
    table_name: str
    channel_id: str
    kind: str
    partition_id: str
    snapshot_id: int | None
    range_start: bytes | None
    range_end: bytes | None
    end_ns: int


class ChannelCheckpoints:
    """GetCheckpoint / Checkpoint, ReadRecords authorisation and the meaning of "finished"."""

    def __init__(self, state: SharedState, clients: ClientRegistry) -> None:
        self.state = state
        self.clients = clients

    def get_checkpoint(self, tunnel_id: str, client_id: str, channel_id: str) -> tuple[str, int]:
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            self.clients.live_client(tunnel, client_id, self.state.clock.now_us())
            ch = self.state.channel(tunnel, channel_id)
            return ch.ckpt_token, ch.ckpt_seq

    def checkpoint(self, tunnel_id: str, client_id: str, channel_id: str, token: str, seq: int) -> None:
        pos = (None if token == tokens.FINISHED
               else tokens.decode(token, tokens.binding(tunnel_id, channel_id)))
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            self.clients.live_client(tunnel, client_id, self.state.clock.now_us())
            ch = self.state.channel(tunnel, channel_id)
            self._require_owner(ch, client_id)
            if pos is not None and isinstance(pos, tokens.StreamPosition) != ch.is_stream:
                raise parameter_invalid(f"token does not belong to a {ch.kind} channel")
            if seq <= ch.ckpt_seq:
                raise sequence_mismatch(ch.ckpt_seq, seq)
            ch.ckpt_token, ch.ckpt_seq = token, seq
            if pos is None:
                if ch.final_count is not None:
                    ch.ckpt_count = ch.final_count
                if ch.final_rpo_ns is not None and ch.is_stream:
                    ch.ckpt_rpo_ns = max(ch.ckpt_rpo_ns, ch.final_rpo_ns)
            else:
                ch.ckpt_count = pos.count
                if isinstance(pos, tokens.StreamPosition):
                    ch.ckpt_rpo_ns = pos.consumed_ns
            self.state.repo.save_checkpoint(tunnel_id, ch)

    @staticmethod
    def _require_owner(ch: ChannelState, client_id: str) -> None:
        if ch.owner != client_id or ch.status not in (OPEN, CLOSING):
            raise resource_gone(
                f"channel {ch.channel_id} is not held by this client (status {ch.status}); "
                "wait for the next heartbeat")

    def grant_read(self, tunnel_id: str, client_id: str, channel_id: str) -> ReadGrant:
        """Validate a ReadRecords call (tunnel, live client, ownership, expiry) and copy what it needs."""
        with self.state.lock:
            tunnel = self.state.tunnel_by_id(tunnel_id)
            self.clients.live_client(tunnel, client_id, self.state.clock.now_us())
            ch = self.state.channel(tunnel, channel_id)
            self._require_owner(ch, client_id)
            if tunnel.expired:
                raise tunnel_expired()
            return ReadGrant(tunnel_id, tunnel.table_name, channel_id, ch.kind, ch.partition_id,
                             tunnel.snapshot_id, ch.range_start, ch.range_end, tunnel.end_ns)

    def note_finished(self, tunnel_id: str, channel_id: str, count: int, rpo_ns: int) -> None:
        """Remember what a later "finished" checkpoint of this channel stands for (count, consume point)."""
        with self.state.lock:
            tunnel = self.state.tunnels.get(tunnel_id)
            ch = tunnel.channels.get(channel_id) if tunnel else None
            if ch is not None and (ch.final_count, ch.final_rpo_ns) != (count, rpo_ns):
                ch.final_count, ch.final_rpo_ns = count, rpo_ns
                self.state.repo.save_final(tunnel_id, ch)
