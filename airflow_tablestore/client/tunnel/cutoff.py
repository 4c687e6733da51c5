"""Is a tunnel consumed through a cutoff? The one rule the Spark driver (``ConsumerJob``),
``TablestoreReplicationPlanOperator`` and ``TablestoreTunnelConsumePointSensor`` share, decided from a
``DescribeTunnel`` answer alone."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_tablestore.client.epoch import ns_to_iso
from airflow_tablestore.client.model import (
    ChannelStatus,
    TunnelDescription,
    TunnelStage,
    TunnelType,
)

BASE = "BaseData"
STREAM = "Stream"


@dataclass(frozen=True)
class Progress:
    """The verdict, the consume point it rests on (ns, 0 = none) and a line for logs."""

    done: bool
    consume_point_ns: int
    message: str


def _iso(ns: int) -> str:
    return ns_to_iso(ns) or "not set yet"


def full_phase_done(desc: TunnelDescription) -> bool:
    """True once the tunnel has no BaseData work left (stage ProcessStream, or a finished BaseData tunnel)."""
    info = desc.tunnel
    if info.tunnel_type == TunnelType.STREAM or info.stage == TunnelStage.PROCESS_STREAM:
        return True
    if info.tunnel_type == TunnelType.BASE_DATA and info.stage != TunnelStage.INIT:
        return all(ch.status == ChannelStatus.TERMINATED for ch in desc.channels)
    return False


def consumed_through(desc: TunnelDescription, cutoff_ns: int) -> Progress:
    """Whether every change before ``cutoff_ns`` has been consumed.

    A tunnel whose channels are all TERMINATED has nothing left (done); a BaseData tunnel is done only then.
    A Stream or BaseAndStream tunnel is done once its base data is consumed and every live stream channel's
    consume point (its last checkpoint) is at or past the cutoff; with no live stream channel, the tunnel's
    own consume point decides. A consume point of 0 (no position yet) is never done.
    """
    channels = desc.channels
    terminated = sum(1 for c in channels if c.status == ChannelStatus.TERMINATED)
    if desc.tunnel.tunnel_type == TunnelType.BASE_DATA or (channels and terminated == len(channels)):
        done = bool(channels) and terminated == len(channels)
        return Progress(done, desc.consume_point_ns, f"{terminated}/{len(channels)} channels terminated")
    if not full_phase_done(desc):
        return Progress(False, 0, f"base data not consumed yet (tunnel stage {desc.tunnel.stage.value})")
    live = [
        c.consume_point_ns
        for c in channels
        if c.channel_type == STREAM and c.status != ChannelStatus.TERMINATED
    ]
    point = min(live) if live else desc.consume_point_ns
    done = point > 0 and point >= cutoff_ns
    scope = f"slowest of {len(live)} stream channels" if live else "tunnel"
    return Progress(done, point, f"consume point {_iso(point)} ({scope}), cutoff {_iso(cutoff_ns)}")

