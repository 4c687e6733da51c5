"""The tunnel session that TunnelWorker and the Spark driver share: table-driven tests of the version rule and
what a client reports for each channel status (pure functions: no server); the checkpoint rule and what each
failure means (lost, fatal, transient) against the emulator."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from airflow_tablestore.client.errors import InvalidParameterError, ResourceGoneError, TunnelNotFoundError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.session import (
    CheckpointOutcome,
    SessionLostError,
    TunnelSession,
    merge_channels,
    report_for,
    store_checkpoint,
    transition,
)

OPEN, CLOSING, CLOSE, TERMINATED = (ChannelStatus.OPEN, ChannelStatus.CLOSING, ChannelStatus.CLOSE,
                                    ChannelStatus.TERMINATED)
STATUSES = [OPEN, CLOSING, CLOSE, TERMINATED]


# -- version rule: every local/remote status pair, with older, equal and newer local versions ----------------
@pytest.mark.parametrize(("local_status", "remote_status"), list(itertools.product(STATUSES, STATUSES)))
@pytest.mark.parametrize(("local_version", "winner"), [(4, "remote"), (5, "remote"), (6, "local")],
                         ids=["local-older", "same-version", "local-newer"])
def test_merge_keeps_the_higher_version(local_status: ChannelStatus, remote_status: ChannelStatus,
                                        local_version: int, winner: str) -> None:
    local = Channel("c", local_version, local_status)
    remote = Channel("c", 5, remote_status)
    merged = merge_channels({"c": local}, [remote])
    assert merged == {"c": local if winner == "local" else remote}


def test_merge_drops_channels_the_server_no_longer_lists_and_adds_new_ones() -> None:
    """Owner changes: a channel moved to another client disappears from our answer; a new one appears."""
    local = {"gone": Channel("gone", 9, OPEN), "kept": Channel("kept", 2, OPEN)}
    merged = merge_channels(local, [Channel("kept", 2, OPEN), Channel("new", 1, OPEN)])
    assert merged == {"kept": Channel("kept", 2, OPEN), "new": Channel("new", 1, OPEN)}


def test_transition_bumps_the_version() -> None:
    assert transition(Channel("x", 7, OPEN), TERMINATED) == Channel("x", 8, TERMINATED)


# -- reports: every server status x (finished, release) ---------------------------------------------------
REPORTS = [
    # server status, finished, release -> reported status (None: nothing to report)
    (OPEN, False, False, None),
    (OPEN, False, True, CLOSE),            # the consumer gave the channel up (stopped, failed)
    (OPEN, True, False, TERMINATED),
    (OPEN, True, True, TERMINATED),        # finished wins over release: the data is done
    (CLOSING, False, False, None),         # the server wants it back, but a read is still in flight
    (CLOSING, False, True, CLOSE),
    (CLOSING, True, False, TERMINATED),
    (CLOSING, True, True, TERMINATED),
    *[(status, finished, release, None)    # not ours: never reported
      for status in (CLOSE, TERMINATED) for finished in (False, True) for release in (False, True)],
]


@pytest.mark.parametrize(("status", "finished", "release", "expected"), REPORTS)
def test_report_for(
    status: ChannelStatus, finished: bool, release: bool, expected: ChannelStatus | None
) -> None:
    report = report_for(Channel("c", 3, status), finished=finished, release=release)
    if expected is None:
        assert report is None
    else:
        assert report == Channel("c", 4, expected)


def test_a_pending_report_survives_the_next_answer_and_is_then_superseded() -> None:
    """We report CLOSE at version 4; the server still answers version 3 (it has not applied it): ours stays.
    Then the server re-opens the channel for us at version 5: its copy wins, and there is nothing to
    report."""
    reported = report_for(Channel("c", 3, CLOSING), finished=False, release=True)
    assert reported == Channel("c", 4, CLOSE)
    merged = merge_channels({"c": reported}, [Channel("c", 3, CLOSING)])
    assert merged["c"] == reported
    merged = merge_channels(merged, [Channel("c", 5, OPEN)])
    assert merged["c"] == Channel("c", 5, OPEN)
    assert report_for(merged["c"], finished=False, release=False) is None


# -- checkpoints against the emulator -----------------------------------------------------------------------
@pytest.fixture
def held_channel(tablestore_client: Any, tablestore_tunnel_client: TunnelClient) -> Any:
    from airflow_helpers import simple_schema, unique

    table = unique("ckpt")
    tablestore_client.create_table(simple_schema(table))
    tablestore_client.put_row(table, (("id", "a"), ("seq", 1)), [("v", 1)])
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "t", "BaseData")
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=60)
    channels = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    (channel,) = [c for c in channels if c.status == OPEN]
    token, seq = tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, channel.channel_id)
    read = tablestore_tunnel_client.read_records(tunnel_id, client_id, channel.channel_id, token)
    return tablestore_tunnel_client, tunnel_id, client_id, channel.channel_id, token, seq, read.next_token


def test_checkpoint_stored(held_channel: Any) -> None:
    client, tunnel_id, client_id, channel, _, seq, next_token = held_channel
    result = store_checkpoint(client, tunnel_id, client_id, channel, next_token, seq + 1)
    assert result.outcome is CheckpointOutcome.STORED
    assert client.get_checkpoint(tunnel_id, client_id, channel) == (next_token, seq + 1)


def test_checkpoint_that_already_landed_is_stored(held_channel: Any) -> None:
    client, tunnel_id, client_id, channel, _, seq, next_token = held_channel
    store_checkpoint(client, tunnel_id, client_id, channel, next_token, seq + 1)
    again = store_checkpoint(client, tunnel_id, client_id, channel, next_token, seq + 1)  # a retried attempt
    assert again.outcome is CheckpointOutcome.STORED and again.stored_sequence == seq + 1


def test_checkpoint_moved_by_someone_else(held_channel: Any) -> None:
    client, tunnel_id, client_id, channel, token, seq, next_token = held_channel
    client.checkpoint(
        tunnel_id, client_id, channel, token, seq + 3
    )  # another writer, same token, newer number
    result = store_checkpoint(client, tunnel_id, client_id, channel, next_token, seq + 1)
    assert result.outcome is CheckpointOutcome.MOVED
    assert (result.stored_token, result.stored_sequence) == (token, seq + 3)
    assert client.get_checkpoint(tunnel_id, client_id, channel) == (token, seq + 3)  # never overwritten


def test_checkpoint_of_a_channel_no_longer_ours(held_channel: Any) -> None:
    client, tunnel_id, client_id, channel, _, seq, next_token = held_channel
    client.shutdown(tunnel_id, client_id)
    other = client.connect(tunnel_id, timeout_s=60)
    result = store_checkpoint(client, tunnel_id, other, channel, next_token, seq + 1)
    assert result.outcome is CheckpointOutcome.GONE and result.error is not None
    assert result.error.code == "OTSResourceGone"


# -- the session: lost, fatal and transient failures against the emulator -----------------------------------
@pytest.fixture
def stream_tunnel(tablestore_client: Any, tablestore_tunnel_client: TunnelClient) -> tuple[str, str]:
    from airflow_helpers import simple_schema, unique

    table = unique("sess")
    tablestore_client.create_table(simple_schema(table))
    return table, tablestore_tunnel_client.create_tunnel(table, "t", "Stream")


@pytest.fixture
def once_client(tablestore_emulator: Any) -> Any:
    """A tunnel client whose transport never retries: each emulator fault reaches the session."""
    with TunnelClient(**tablestore_emulator.client_kwargs, retry=RetryPolicy.no_retry()) as client:
        yield client


def test_a_transient_heartbeat_failure_keeps_the_session(tablestore_emulator: Any, once_client: TunnelClient,
                                                         stream_tunnel: tuple[str, str]) -> None:
    session = TunnelSession(once_client, stream_tunnel[1], client_timeout_s=60)
    session.connect()
    tablestore_emulator.control.add_fault("/tunnel/heartbeat", "OTSInternalServerError", status=500, count=1)
    assert session.heartbeat([]) is None  # beat again later
    assert not session.lost and session.fatal is None
    assert session.heartbeat([]) is not None
    session.shutdown()


def test_no_heartbeat_for_the_client_timeout_loses_the_session(tablestore_emulator: Any, once_client: TunnelClient,
                                                               stream_tunnel: tuple[str, str]) -> None:
    session = TunnelSession(once_client, stream_tunnel[1], client_timeout_s=0.2)
    session.connect()
    time.sleep(0.3)  # longer than the client timeout since the last success (the connect)
    tablestore_emulator.control.add_fault("/tunnel/heartbeat", "OTSInternalServerError", status=500, count=1)
    with pytest.raises(SessionLostError, match="no successful heartbeat"):
        session.heartbeat([])
    assert session.lost
    with pytest.raises(SessionLostError):
        session.check()


def test_a_forgotten_client_is_lost_and_not_shut_down(tablestore_emulator: Any, tablestore_tunnel_client: TunnelClient,
                                                      stream_tunnel: tuple[str, str]) -> None:
    session = TunnelSession(tablestore_tunnel_client, stream_tunnel[1], client_timeout_s=60)
    client_id = session.connect()
    tablestore_emulator.control.add_fault("/tunnel/heartbeat", "OTSResourceGone", status=410, count=1)
    with pytest.raises(SessionLostError) as lost:
        session.heartbeat([])
    assert isinstance(lost.value.__cause__, ResourceGoneError)
    session.shutdown()  # no Shutdown RPC for a lost client (the fault only answered 410; the server knows it)
    tablestore_tunnel_client.heartbeat(stream_tunnel[1], client_id, [])  # would be 410 after a Shutdown
    assert session.connect() != client_id and not session.lost  # a new client id, a fresh session
    session.shutdown()


def test_a_deleted_tunnel_is_fatal_at_once(tablestore_tunnel_client: TunnelClient,
                                           stream_tunnel: tuple[str, str]) -> None:
    table, tunnel_id = stream_tunnel
    session = TunnelSession(tablestore_tunnel_client, tunnel_id, client_timeout_s=60)
    session.connect()
    tablestore_tunnel_client.delete_tunnel(table, "t")
    with pytest.raises(InvalidParameterError) as fatal:  # not retried until a timeout: no retry can fix it
        session.heartbeat([])
    assert session.fatal is fatal.value
    with pytest.raises(InvalidParameterError):
        session.check()
    with pytest.raises(TunnelNotFoundError):  # connect to a missing tunnel: the typed error, not "lost"
        TunnelSession(tablestore_tunnel_client, tunnel_id, client_timeout_s=60).connect()


def test_a_checkpoint_that_fails_transiently_is_retried_under_the_same_number(
        tablestore_emulator: Any, held_channel: Any) -> None:
    client, tunnel_id, client_id, channel, _, seq, next_token = held_channel
    session = TunnelSession(client, tunnel_id, client_timeout_s=60)
    session.client_id = client_id
    tablestore_emulator.control.add_fault("/tunnel/checkpoint", "OTSInternalServerError", status=500, count=2)
    try:
        result = session.store(channel, next_token, seq + 1)
    finally:
        tablestore_emulator.control.clear_faults()
    assert result.outcome is CheckpointOutcome.STORED
    assert client.get_checkpoint(tunnel_id, client_id, channel) == (next_token, seq + 1)
