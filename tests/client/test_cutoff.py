"""The one "consumed through the cutoff" rule (driver, DAG plan task and sensor), case by case."""

from __future__ import annotations

import pytest

from airflow_tablestore.client.model import (
    ChannelInfo,
    ChannelStatus,
    TunnelDescription,
    TunnelInfo,
    TunnelStage,
    TunnelType,
)
from airflow_tablestore.client.tunnel.cutoff import consumed_through, full_phase_done

OPEN, WAIT, TERMINATED = ChannelStatus.OPEN, ChannelStatus.WAIT, ChannelStatus.TERMINATED


def _desc(kind: TunnelType, stage: TunnelStage, channels: list[tuple[str, ChannelStatus, int]],
          tunnel_point: int = 0) -> TunnelDescription:
    info = TunnelInfo("tid", "tn", "tbl", "inst", kind, stage, "sid")
    return TunnelDescription(info, tuple(ChannelInfo(f"c{i}", t, s, None, p, 0)
                                         for i, (t, s, p) in enumerate(channels)), tunnel_point)


CASES = [
    # (description, cutoff, done, why)
    (
        _desc(TunnelType.BASE_AND_STREAM, TunnelStage.PROCESS_BASE_DATA, [("BaseData", OPEN, 0)]),
        1,
        False,
        "base data left",
    ),
    (
        _desc(
            TunnelType.BASE_AND_STREAM,
            TunnelStage.PROCESS_STREAM,
            [("Stream", OPEN, 50), ("Stream", OPEN, 80)],
            50,
        ),
        50,
        True,
        "slowest channel at the cutoff",
    ),
    (
        _desc(
            TunnelType.BASE_AND_STREAM,
            TunnelStage.PROCESS_STREAM,
            [("Stream", OPEN, 50), ("Stream", OPEN, 80)],
            80,
        ),
        60,
        False,
        "one live channel behind, whatever the tunnel's own point says",
    ),
    (
        _desc(
            TunnelType.STREAM, TunnelStage.PROCESS_STREAM, [("Stream", WAIT, 10), ("Stream", OPEN, 90)], 90
        ),
        50,
        False,
        "a waiting child channel counts",
    ),
    (
        _desc(TunnelType.STREAM, TunnelStage.PROCESS_STREAM, [("Stream", OPEN, 0)]),
        0,
        False,
        "no position yet",
    ),
    (
        _desc(TunnelType.STREAM, TunnelStage.PROCESS_STREAM, [("Stream", TERMINATED, 40)], 40),
        10**18,
        True,
        "everything terminated: nothing left",
    ),
    (
        _desc(
            TunnelType.BASE_DATA,
            TunnelStage.PROCESS_BASE_DATA,
            [("BaseData", TERMINATED, 0), ("BaseData", OPEN, 0)],
        ),
        0,
        False,
        "base channel left",
    ),
    (_desc(TunnelType.BASE_DATA, TunnelStage.PROCESS_BASE_DATA, []), 0, False, "no channels yet"),
]


@pytest.mark.parametrize(("desc", "cutoff", "done", "why"), CASES, ids=[c[3] for c in CASES])
def test_consumed_through(desc: TunnelDescription, cutoff: int, done: bool, why: str) -> None:
    progress = consumed_through(desc, cutoff)
    assert progress.done is done, (why, progress.message)
    assert progress.message


def test_full_phase_done() -> None:
    assert not full_phase_done(_desc(TunnelType.BASE_AND_STREAM, TunnelStage.PROCESS_BASE_DATA, []))
    assert full_phase_done(_desc(TunnelType.BASE_AND_STREAM, TunnelStage.PROCESS_STREAM, []))
    assert full_phase_done(_desc(TunnelType.STREAM, TunnelStage.PROCESS_STREAM, []))
    assert full_phase_done(
        _desc(TunnelType.BASE_DATA, TunnelStage.PROCESS_BASE_DATA, [("BaseData", TERMINATED, 0)])
    )
