"""When a TunnelWorker heartbeats: every interval, and early after a channel closes only while the worker has room
for another channel (fewer open channels than read threads), so its heartbeats do not follow the channel count."""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_tablestore.client.model import ChannelStatus, TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.worker import TunnelWorker
from airflow_tablestore.emulator.testing import EmulatorProcess

from .helpers import RecordingProcessor, fast_config, table_schema

EMULATOR_ARGS = ["--base-channel-rows", "5", "--log-level", "WARNING"]
INTERVAL_S = 30.0  # far longer than any drain below: a heartbeat before it is an early one


def _base_tunnel(tables: TableClient, tunnels: TunnelClient, table: str, rows: int) -> str:
    tables.create_table(table_schema(table, stream=False))
    for n in range(rows):
        tables.put_row(table, [("pk", "k"), ("n", n)], {"v": n})
    return str(tunnels.create_tunnel(table, "hb", TunnelType.BASE_DATA))


def test_closes_wake_the_heartbeat_while_there_is_room(
    tablestore_emulator: EmulatorProcess, tablestore_client: Any, tablestore_tunnel_client: TunnelClient,
    unique_table: str,
) -> None:
    """3 channels, 8 read threads: each close is reported at once, not a 30 s interval later."""
    tunnel_id = _base_tunnel(tablestore_client, tablestore_tunnel_client, unique_table, 15)
    processor = RecordingProcessor()
    config = fast_config(heartbeat_interval_s=INTERVAL_S, heartbeat_timeout_s=120.0, read_threads=8)
    with TunnelWorker(tablestore_tunnel_client, tunnel_id, processor, config):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            channels = tablestore_tunnel_client.describe_tunnel(unique_table, "hb").channels
            if len(channels) == 3 and all(c.status is ChannelStatus.TERMINATED for c in channels):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the closes were not reported early: {channels}")
    assert len(processor.records) == 15


def test_closes_do_not_wake_the_heartbeat_without_room(
    tablestore_emulator: EmulatorProcess, tablestore_tunnel_client: TunnelClient
) -> None:
    """Open channels at the last beat less the closes since decide: 3 open, 2 read threads → a close leaves 2,
    no room; a second close leaves 1: room, the beat comes at once."""
    config = fast_config(heartbeat_interval_s=INTERVAL_S, heartbeat_timeout_s=120.0, read_threads=2)
    worker = TunnelWorker(tablestore_tunnel_client, "no-tunnel", RecordingProcessor(), config)
    worker._open_at_beat = 3
    threading.Timer(0.1, worker._channel_closed).start()
    started = time.monotonic()
    worker._wait_for_beat(started + 1.0)
    assert time.monotonic() - started >= 0.95  # waited for the regular beat
    threading.Timer(0.1, worker._channel_closed).start()
    started = time.monotonic()
    worker._wait_for_beat(started + INTERVAL_S)
    assert time.monotonic() - started < 5  # woken by the close that left room
