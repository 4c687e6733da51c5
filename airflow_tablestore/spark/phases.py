"""When a phase is complete, from a ``DescribeTunnel`` answer (no Spark, no pyarrow: the DAG uses it too)."""

from __future__ import annotations

from airflow_tablestore.client.model import ChannelStatus, TunnelDescription, TunnelStage, TunnelType

BASE = "BaseData"
STREAM = "Stream"


def full_phase_done(desc: TunnelDescription) -> bool:
    """True once the tunnel has no BaseData work left (stage ProcessStream, or a finished BaseData tunnel)."""
    info = desc.tunnel
    if info.tunnel_type == TunnelType.STREAM or info.stage == TunnelStage.PROCESS_STREAM:
        return True
    if info.tunnel_type == TunnelType.BASE_DATA and info.stage != TunnelStage.INIT:
        return all(ch.status == ChannelStatus.TERMINATED for ch in desc.channels)
    return False


def incremental_done(desc: TunnelDescription, cutoff_ns: int) -> bool:
    """True when every live stream channel (hence the tunnel consume point) is at or past ``cutoff_ns``."""
    live = [ch for ch in desc.channels if ch.channel_type == STREAM and ch.status != ChannelStatus.TERMINATED]
    if not live:
        return desc.consume_point_ns >= cutoff_ns
    return all(ch.consume_point_ns >= cutoff_ns for ch in live)
