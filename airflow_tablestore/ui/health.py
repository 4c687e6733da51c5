"""The page's verdicts: a channel's lag, and whether it is stuck (no progress over the last runs, or held by a
client that is gone). Pure functions of what :mod:`.instances` and :mod:`.metadata` collected."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_tablestore.client.epoch import datetime_to_ns
from airflow_tablestore.client.model import ChannelInfo, ChannelStatus
from airflow_tablestore.ui.metadata import RunPoint

STUCK_RUNS = 3
"""A channel whose consume point is still before the start of the consumers' 3rd latest finished run made no
progress over 3 runs."""
HOLD_GRACE_S = 300.0
"""A channel still owned this long after the consumers' last run ended, with none running, is held by a gone
client (the Tunnel Service frees a dead client's channels only after its heartbeat timeout)."""
LIVE = (ChannelStatus.OPEN, ChannelStatus.CLOSING, ChannelStatus.WAIT)


@dataclass(frozen=True)
class Consumers:
    """What the tunnel's consumer DAGs are doing: their finished runs (newest last, all DAGs merged by end
    time) and whether a consumer task runs now. ``dag_ids`` empty: nobody in Airflow consumes the tunnel."""

    dag_ids: tuple[str, ...] = ()
    runs: tuple[RunPoint, ...] = ()
    running: bool = False


def lag_s(channel: ChannelInfo, now_ns: int) -> float | None:
    """Now minus the channel's consume point (None when it has none: a base-data channel)."""
    if not channel.consume_point_ns:
        return None
    return max(0.0, (now_ns - channel.consume_point_ns) / 1e9)


def stuck_reason(channel: ChannelInfo, consumers: Consumers, now_ns: int, runs: int = STUCK_RUNS) -> str | None:
    """Why ``channel`` is stuck, or None. Only tunnels consumed by Airflow DAGs are judged: their runs say what
    progress to expect."""
    if not consumers.dag_ids or channel.status not in LIVE:
        return None
    finished: Sequence[RunPoint] = consumers.runs
    if channel.client_id and channel.status != ChannelStatus.WAIT and not consumers.running:
        last_end = max((r.end for r in finished if r.end), default=None)
        idle_s = (now_ns - datetime_to_ns(last_end)) / 1e9 if last_end else None
        if idle_s is None or idle_s > HOLD_GRACE_S:
            since = f"{human_duration(idle_s)} after the last run ended" if idle_s is not None else "no run has ended"
            return (f"held by client {channel.client_id} while no consumer task runs ({since}): a dead client "
                    "keeps it until its heartbeat timeout")
    if channel.consume_point_ns and len(finished) >= runs:
        bar = finished[-runs]
        if bar.start and channel.consume_point_ns < datetime_to_ns(bar.start):
            return f"no progress over the last {runs} runs: consume point before run {bar.run_id} started"
    return None


def human_duration(seconds: float | None) -> str:
    """``42 s``, ``17 min``, ``3.5 h``, ``2.0 d`` (``-`` for None)."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"

