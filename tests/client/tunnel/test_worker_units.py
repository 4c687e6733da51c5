"""Pure units of the worker: version merge, transitions, config validation, back-off, the enough-data rule."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tablestore.client.backoff import Backoff
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import Channel
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.reads import ReadResult, enough_data
from airflow_tablestore.client.tunnel.session import merge_channels, transition

OPEN, CLOSING, CLOSE = ChannelStatus.OPEN, ChannelStatus.CLOSING, ChannelStatus.CLOSE


def test_merge_keeps_higher_local_version_and_takes_server_otherwise() -> None:
    local = {
        "a": Channel("a", 3, CLOSE),  # our pending report (server still at 2)
        "b": Channel("b", 1, OPEN),
        "c": Channel("c", 5, OPEN),  # not in the answer any more
    }
    remote = [Channel("a", 2, OPEN), Channel("b", 2, CLOSING), Channel("d", 1, OPEN)]
    merged = merge_channels(local, remote)
    assert merged == {"a": Channel("a", 3, CLOSE), "b": Channel("b", 2, CLOSING), "d": Channel("d", 1, OPEN)}


def test_merge_equal_versions_take_the_server_copy() -> None:
    merged = merge_channels({"a": Channel("a", 4, CLOSE)}, [Channel("a", 4, CLOSING)])
    assert merged["a"].status == CLOSING


def test_transition_bumps_version_by_one() -> None:
    assert transition(Channel("x", 7, OPEN), ChannelStatus.TERMINATED) == Channel(
        "x", 8, ChannelStatus.TERMINATED
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"heartbeat_interval_s": 1.0},
        {"heartbeat_interval_s": 30.0, "heartbeat_timeout_s": 30.0},
        {"max_channel_parallel": 0},
        {"max_channel_parallel": None},
        {"read_threads": 0},
        {"max_buffered_answers": 0},
        {"read_ahead": -1},
        {"checkpoint_interval_s": -1},
        {"reconnect_backoff_s": (2.0, 1.0)},
    ],
)
def test_config_rejects_invalid_settings(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError):
        TunnelWorkerConfig(**kwargs)


def test_config_defaults_follow_the_sdks() -> None:
    cfg = TunnelWorkerConfig()
    assert (cfg.heartbeat_interval_s, cfg.heartbeat_timeout_s, cfg.checkpoint_interval_s) == (
        30.0,
        300.0,
        10.0,
    )
    assert cfg.client_tag
    assert TunnelWorkerConfig(heartbeat_interval_s=0.2, heartbeat_timeout_s=1, allow_short_intervals=True)


def test_backoff_grows_by_factor_and_caps() -> None:
    b = Backoff(base_s=0.02, factor=5, jitter=0.0, max_s=5.0)
    assert [round(b.delay(i), 6) for i in range(5)] == [0.02, 0.1, 0.5, 2.5, 5.0]
    jittered = Backoff(base_s=1.0, factor=1, jitter=0.25, max_s=10)
    assert all(0.75 <= jittered.delay(0) <= 1.25 for _ in range(50))


def test_enough_data_prefers_may_more_then_thresholds() -> None:
    assert enough_data(ReadResult([], "t", True, 0))
    assert not enough_data(ReadResult([object()] * 600, "t", False, 0))  # type: ignore[list-item]
    assert enough_data(ReadResult([object()] * 501, "t", None, 0))  # type: ignore[list-item]
    assert enough_data(ReadResult([], "t", None, 901 * 1024))
    assert not enough_data(ReadResult([], "t", None, 10))


def _closed_consumer(version: int) -> Any:
    """A consumer that failed before starting (no RPC is ever made by the methods under test)."""
    from airflow_tablestore.client.tunnel.channel import ChannelConsumer
    from airflow_tablestore.client.tunnel.metrics import WorkerMetrics
    from airflow_tablestore.client.tunnel.processor import ChannelContext

    ctx = ChannelContext("t", "c", "ch", "Stream", "tok", "tok", "trace")
    return ChannelConsumer(
        client=None, session=None, context=ctx, channel=Channel("ch", version, OPEN), token="tok",  # type: ignore[arg-type]
        sequence_number=0, processor=None, owns_processor=False, config=TunnelWorkerConfig(),
        metrics=WorkerMetrics(), pools=None, on_closed=lambda: None, on_fatal=lambda exc: None,
        failed=RuntimeError("GetCheckpoint failed"),
    )


def test_closed_consumer_reports_once_then_again_after_a_concurrent_server_bump() -> None:
    consumer = _closed_consumer(4)
    assert consumer.report() == Channel("ch", 5, CLOSE)
    assert consumer.report() is None  # already sent, the server has not answered with a newer version
    consumer.notify(Channel("ch", 5, CLOSING))  # server bumped OPEN→CLOSING at the same version: ours ignored
    assert consumer.report() == Channel("ch", 6, CLOSE)
    assert not consumer.superseded_by(Channel("ch", 6, CLOSING))
    assert consumer.superseded_by(Channel("ch", 7, OPEN))  # re-opened for us: needs a fresh consumer
    consumer.notify(Channel("ch", 3, OPEN))  # stale update ignored
    assert consumer.version_seen == 5
