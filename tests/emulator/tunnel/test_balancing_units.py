"""Pure unit tests of the tunnel service's channel assignment (no server, no HTTP): eligibility and rebalancing."""

from __future__ import annotations

import pytest

from airflow_tablestore.emulator.tunnel.balancing import eligible, parents_done, rebalance
from airflow_tablestore.emulator.tunnel.model import (
    BASE_AND_STREAM,
    BASE_DATA,
    CLOSE,
    CLOSING,
    OPEN,
    STAGE_BASE,
    STREAM,
    TERMINATED,
    WAIT,
    ChannelState,
    TunnelState,
)


def tunnel(*channels: ChannelState) -> TunnelState:
    state = TunnelState("t1", "tbl", "tun", BASE_AND_STREAM, STAGE_BASE, 0, "s", None, 0, 0, 0, 0, b"")
    state.channels = {c.channel_id: c for c in channels}
    return state


def base(cid: str, status: str = WAIT, owner: str | None = None) -> ChannelState:
    return ChannelState(cid, BASE_DATA, 0, status=status, owner=owner)


def stream(cid: str, partition: str, parents: tuple[str, ...] = (), status: str = WAIT,
           owner: str | None = None) -> ChannelState:
    return ChannelState(cid, STREAM, 0, partition_id=partition, parent_ids=parents, status=status, owner=owner)


@pytest.mark.parametrize(
    ("channel", "base_done", "expected"),
    [
        (base("b", WAIT), False, True),
        (base("b", TERMINATED), False, False),
        (stream("s", "p1"), False, False),  # stream channels wait for the base data
        (stream("s", "p1"), True, True),
        (stream("s", "p1", status=TERMINATED), True, False),
    ],
)
def test_eligibility(channel: ChannelState, base_done: bool, expected: bool) -> None:
    assert eligible(tunnel(channel), channel, base_done) is expected


def test_suspended_channel_is_not_eligible() -> None:
    channel = base("b")
    channel.suspended = True
    assert not eligible(tunnel(channel), channel, True)


def test_a_child_partition_waits_for_its_parents() -> None:
    parent = stream("s1", "p1", status=OPEN)
    child = stream("s2", "p2", parents=("p1",))
    state = tunnel(parent, child)
    assert not parents_done(state, child)
    parent.status = TERMINATED
    assert parents_done(state, child)
    assert parents_done(state, stream("s3", "p3", parents=("not-in-this-tunnel",)))


def test_a_lone_client_takes_every_eligible_channel_with_a_version_bump() -> None:
    channels = [base(f"b{i}") for i in range(3)]
    state = tunnel(*channels, stream("s", "p1"))
    changed = rebalance(state, "c1", live=1)
    assert [c.channel_id for c in changed] == ["b0", "b1", "b2"]  # not the stream channel: base not done
    assert all(c.status == OPEN and c.owner == "c1" and c.version == 1 for c in changed)


def test_a_second_client_makes_the_first_shed_down_to_its_share() -> None:
    channels = [base(f"b{i}", OPEN, "c1") for i in range(4)]
    state = tunnel(*channels)
    shed = rebalance(state, "c1", live=2)
    assert [c.channel_id for c in shed] == ["b2", "b3"]
    assert all(c.status == CLOSING and c.owner == "c1" for c in shed)  # the owner reports CLOSE itself
    for c in shed:
        c.status, c.owner = CLOSE, None
    taken = rebalance(state, "c2", live=2)
    assert [c.channel_id for c in taken] == ["b2", "b3"] and all(c.owner == "c2" for c in taken)


def test_nothing_changes_without_live_clients_or_eligible_channels() -> None:
    assert rebalance(tunnel(base("b")), "c1", live=0) == []
    assert rebalance(tunnel(base("b", TERMINATED)), "c1", live=1) == []


def test_channels_owned_by_another_client_are_never_taken() -> None:
    state = tunnel(base("b0", OPEN, "c2"), base("b1"))
    changed = rebalance(state, "c1", live=1)
    assert [c.channel_id for c in changed] == ["b1"]
    assert state.channels["b0"].owner == "c2"


def test_base_done_is_vacuous_for_a_stream_only_tunnel() -> None:
    state = tunnel(stream("s", "p1"))
    state.tunnel_type = STREAM
    assert state.base_done()
    assert [c.channel_id for c in rebalance(state, "c1", live=1)] == ["s"]
