"""The round session (the Spark driver's and the streaming planner's) against the emulator: assignment, release
on rebalance, TERMINATED reports, checkpoint sequence handling, lost and fatal heartbeats, and shutdown."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_tablestore.client.errors import InvalidParameterError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import FINISHED, TunnelClient
from airflow_tablestore.client.tunnel.rounds import RoundSession
from demo import replication as demo

EMULATOR_ARGS = ["--base-channel-rows", "400", "--stream-partitions", "2", "--max-read-records", "150"]


def _tunnel(tablestore_client: Any, tablestore_tunnel_client: TunnelClient, unique: Any,
            rows: int = 1200) -> tuple[str, str, str]:
    src, name = unique("src"), unique("tun")
    demo.create_source_table(tablestore_client, src)
    demo.load_rows(tablestore_client, src, rows)
    tunnel_id = tablestore_tunnel_client.create_tunnel(src, name)
    return src, name, tunnel_id


def _owners(tablestore_tunnel_client: TunnelClient, src: str, name: str) -> dict[str, tuple[ChannelStatus, str | None]]:
    return {c.channel_id: (c.status, c.client_id) for c in tablestore_tunnel_client.describe_tunnel(src, name).channels}


def test_session_takes_channels_and_releases_them_on_rebalance(tablestore_client: Any,
                                                               tablestore_tunnel_client: TunnelClient,
                                                               unique: Any) -> None:
    src, name, tunnel_id = _tunnel(tablestore_client, tablestore_tunnel_client, unique)
    session = RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=60, client_timeout=120)
    session.start()
    try:
        mine = session.open_channels()
        assert len(mine) == 3  # 1200 rows / 400 rows per base channel
        other = tablestore_tunnel_client.connect(tunnel_id, timeout_s=120, client_tag="other")
        tablestore_tunnel_client.heartbeat(tunnel_id, other, [])
        for _ in range(4):  # CLOSING arrives, CLOSE is reported, the other client gets the channel
            session.heartbeat()
            theirs = tablestore_tunnel_client.heartbeat(tunnel_id, other, [])
        assert 0 < len(session.open_channels()) < 3
        assert any(c.status == ChannelStatus.OPEN for c in theirs)
        assert set(session.open_channels()).isdisjoint(c.channel_id for c in theirs)
        tablestore_tunnel_client.shutdown(tunnel_id, other)
    finally:
        session.close()
    assert all(owner is None for _, owner in _owners(tablestore_tunnel_client, src, name).values())


def test_finished_channels_are_reported_terminated(tablestore_client: Any, tablestore_tunnel_client: TunnelClient,
                                                   unique: Any) -> None:
    src, name, tunnel_id = _tunnel(tablestore_client, tablestore_tunnel_client, unique, rows=300)
    with RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=60, client_timeout=120) as session:
        (channel,) = session.open_channels()
        token, seq = session.tunnel.get_checkpoint(channel)
        while token != FINISHED:
            token = tablestore_tunnel_client.read_records(tunnel_id, session.client_id, channel, token).next_token
        assert session.commit(channel, session.tunnel.get_checkpoint(channel)[0], seq, FINISHED)
        session.mark_finished(channel)
        assert channel not in session.open_channels()
        session.heartbeat()
        session.heartbeat()
        status = _owners(tablestore_tunnel_client, src, name)
        assert status[channel][0] == ChannelStatus.TERMINATED


def test_commit_never_recommits_under_another_sequence(tablestore_client: Any, tablestore_tunnel_client: TunnelClient,
                                                       unique: Any) -> None:
    """The Parquet sink names a staged round by the sequence it was planned with, and recovery matches the
    stored sequence: a commit must land with exactly that sequence or not at all (the round is replayed)."""
    src, name, tunnel_id = _tunnel(tablestore_client, tablestore_tunnel_client, unique, rows=300)
    with RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=60, client_timeout=120) as session:
        (channel,) = session.open_channels()
        start, seq = session.tunnel.get_checkpoint(channel)
        result = tablestore_tunnel_client.read_records(tunnel_id, session.client_id, channel, start)
        # Another checkpoint with the same token moved the sequence number on: ours is now stale.
        tablestore_tunnel_client.checkpoint(tunnel_id, session.client_id, channel, start, seq + 5)
        assert not session.commit(channel, start, seq, result.next_token)
        assert session.tunnel.get_checkpoint(channel) == (start, seq + 5)
        # The replayed round, planned from the stored (token, sequence), commits.
        assert session.commit(channel, start, seq + 5, result.next_token)
        assert session.tunnel.get_checkpoint(channel) == (result.next_token, seq + 6)
        # A checkpoint moved on by someone else is kept, not overwritten.
        later = tablestore_tunnel_client.read_records(tunnel_id, session.client_id, channel,
                                                      result.next_token).next_token
        token, current = session.tunnel.get_checkpoint(channel)
        tablestore_tunnel_client.checkpoint(tunnel_id, session.client_id, channel, later, current + 1)
        assert not session.commit(channel, start, seq, result.next_token)
        assert session.tunnel.get_checkpoint(channel)[0] == later


def test_a_checkpoint_that_fails_with_a_5xx_is_retried(tablestore_emulator: Any, tablestore_client: Any,
                                                       tablestore_tunnel_client: TunnelClient, unique: Any) -> None:
    """A checkpoint is not idempotent for the transport, so a 500 used to abort the job after the sink had
    written; the session retries it (the sequence number makes that safe)."""
    src, name, tunnel_id = _tunnel(tablestore_client, tablestore_tunnel_client, unique, rows=300)
    with RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=60, client_timeout=120) as session:
        (channel,) = session.open_channels()
        token, seq = session.tunnel.get_checkpoint(channel)
        next_token = tablestore_tunnel_client.read_records(tunnel_id, session.client_id, channel, token).next_token
        tablestore_emulator.control.add_fault("/tunnel/checkpoint", "OTSInternalServerError", status=500, count=2)
        try:
            assert session.commit(channel, token, seq, next_token)
        finally:
            tablestore_emulator.control.clear_faults()
        assert session.tunnel.get_checkpoint(channel) == (next_token, seq + 1)


def test_a_fatal_heartbeat_in_the_background_fails_the_next_check(tablestore_client: Any,
                                                                   tablestore_tunnel_client: TunnelClient,
                                                                   unique: Any) -> None:
    """The tunnel deleted under a running driver: the background heartbeat stops on the typed error, and the
    driver's next check raises it (the run fails at once instead of reconnecting until the client timeout)."""
    src, name, tunnel_id = _tunnel(tablestore_client, tablestore_tunnel_client, unique, rows=300)
    session = RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=0.1, client_timeout=120).start()
    try:
        tablestore_tunnel_client.delete_tunnel(src, name)
        deadline = time.monotonic() + 60
        while session.tunnel.fatal is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(InvalidParameterError):
            session.tunnel.check()
        assert not session.tunnel.lost  # fatal, not lost: no reconnect is tried
    finally:
        session.close()
