"""The stuck-channel rules and the lag, on hand-made channels and runs (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_tablestore.client.epoch import datetime_to_ns
from airflow_tablestore.client.model import ChannelInfo, ChannelStatus
from airflow_tablestore.ui.health import HOLD_GRACE_S, STUCK_RUNS, Consumers, human_duration, lag_s, stuck_reason
from airflow_tablestore.ui.metadata import RunPoint

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
NOW_NS = datetime_to_ns(NOW)


def channel(status: ChannelStatus = ChannelStatus.OPEN, client: str | None = None,
            point: datetime | None = None) -> ChannelInfo:
    return ChannelInfo("ch-1", "Stream", status, client, datetime_to_ns(point) if point else 0, 0)


def hourly_runs(n: int, last_end: datetime = NOW - timedelta(minutes=50)) -> tuple[RunPoint, ...]:
    """``n`` runs an hour apart, each 5 minutes long, the last ending at ``last_end``."""
    runs = []
    for i in range(n):
        end = last_end - timedelta(hours=n - 1 - i)
        runs.append(RunPoint(f"run_{i}", "success", end - timedelta(minutes=5), end, 10, None))
    return tuple(runs)


def test_lag_is_now_minus_the_consume_point() -> None:
    assert lag_s(channel(point=NOW - timedelta(seconds=90)), NOW_NS) == 90
    assert lag_s(channel(), NOW_NS) is None  # a base-data channel has no consume point


def test_a_channel_behind_the_start_of_the_last_runs_made_no_progress() -> None:
    runs = hourly_runs(STUCK_RUNS)
    consumers = Consumers(("replication",), runs)
    before = runs[0].start - timedelta(minutes=1)  # type: ignore[operator]
    reason = stuck_reason(channel(point=before), consumers, NOW_NS)
    assert reason is not None and f"no progress over the last {STUCK_RUNS} runs" in reason and "run_0" in reason
    after = runs[0].start + timedelta(minutes=1)  # type: ignore[operator]
    assert stuck_reason(channel(point=after), consumers, NOW_NS) is None
    # fewer finished runs than the rule needs: no verdict yet
    assert stuck_reason(channel(point=before), Consumers(("replication",), runs[1:]), NOW_NS) is None


def test_a_channel_held_while_no_consumer_runs_is_held_by_a_dead_client() -> None:
    idle = hourly_runs(2, last_end=NOW - timedelta(seconds=HOLD_GRACE_S + 60))
    held = channel(client="worker-1", point=NOW)
    reason = stuck_reason(held, Consumers(("replication",), idle), NOW_NS)
    assert reason is not None and "held by client worker-1" in reason and "6 min after the last run" in reason
    # the same channel while a consumer task runs, or soon after a run ended: its owner is alive
    assert stuck_reason(held, Consumers(("replication",), idle, running=True), NOW_NS) is None
    recent = hourly_runs(2, last_end=NOW - timedelta(seconds=30))
    assert stuck_reason(held, Consumers(("replication",), recent), NOW_NS) is None
    assert "no run has ended" in (stuck_reason(held, Consumers(("replication",)), NOW_NS) or "")


def test_only_live_channels_of_tunnels_consumed_in_airflow_are_judged() -> None:
    old = NOW - timedelta(days=3)
    runs = hourly_runs(STUCK_RUNS + 2)
    assert stuck_reason(channel(client="w", point=old), Consumers(), NOW_NS) is None  # no consumer DAG
    for status in (ChannelStatus.TERMINATED, ChannelStatus.CLOSE):
        assert stuck_reason(channel(status, point=old), Consumers(("r",), runs), NOW_NS) is None


def test_human_durations() -> None:
    assert [human_duration(s) for s in (None, 42, 600, 3.5 * 3600, 2 * 86400)] == ["-", "42 s", "10 min",
                                                                                   "3.5 h", "2.0 d"]
