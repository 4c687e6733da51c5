"""SIGKILL the Spark consumer mid-round in each phase, rerun: nothing lost, nothing duplicated."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from replication_helpers import make_replica, make_source, replica_differences, snapshot, stream_changes, write_key

from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.sinks.parquet import read_change_log
from demo import replication as demo

from .spark_runs import base_rows, run_consumer

pytestmark = pytest.mark.slow
ROWS = 1500
CHANGES = 400
TUNING = ["--records-per-channel", "100", "--heartbeat-interval", "1", "--client-timeout", "6",
          "--idle-wait", "0.5"]
KILL_IN_ROUND_2 = r"round 1 \("


def _kill_then_rerun(tablestore_emulator: EmulatorProcess, args: list[str]) -> None:
    crashed = run_consumer(tablestore_emulator, [*args, *TUNING], kill_when=KILL_IN_ROUND_2)
    assert crashed.killed, crashed.output[-3000:]
    assert crashed.returncode != 0
    again = run_consumer(tablestore_emulator, [*args, *TUNING])
    assert again.returncode == 0, again.output[-4000:]
    assert "CONSUMER_SUMMARY" in again.output


def test_tablestore_sink_survives_sigkill_in_both_phases(tablestore_emulator: EmulatorProcess,
                                                        tablestore_client: TableClient,
                                                        tablestore_tunnel_client: TunnelClient, unique: object) -> None:
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")  # type: ignore[operator]
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    make_replica(tablestore_client, src, dst)
    args = ["--table", src, "--tunnel", tunnel, "--sink", "tablestore", "--sink-table", dst]

    _kill_then_rerun(tablestore_emulator, [*args, "--phase", "full"])
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []

    demo.write_changes(tablestore_client, src, ROWS, CHANGES)
    cutoff = datetime.now(UTC).isoformat()
    _kill_then_rerun(tablestore_emulator, [*args, "--phase", "incremental", "--cutoff", cutoff])
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []


def test_parquet_sink_survives_sigkill_in_both_phases(tablestore_emulator: EmulatorProcess,
                                                      tablestore_client: TableClient,
                                                      tablestore_tunnel_client: TunnelClient, unique: object,
                                                      tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")  # type: ignore[operator]
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    expected_base = snapshot(tablestore_client, src)
    path = str(tmp_path / "changelog")
    args = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", path]

    _kill_then_rerun(tablestore_emulator, [*args, "--phase", "full"])
    records = arrow_to_records(read_change_log(path))
    assert len(records) == ROWS  # no duplicate from the replayed round
    assert base_rows(records) == expected_base

    writes = demo.write_changes(tablestore_client, src, ROWS, CHANGES)
    cutoff = datetime.now(UTC).isoformat()
    _kill_then_rerun(tablestore_emulator, [*args, "--phase", "incremental", "--cutoff", cutoff])
    records = arrow_to_records(read_change_log(path))
    assert base_rows(records) == expected_base
    assert stream_changes(records) == Counter(write_key(w) for w in writes)


def test_sigterm_shuts_the_tunnel_client_down(tablestore_emulator: EmulatorProcess, tablestore_client: TableClient,
                                              tablestore_tunnel_client: TunnelClient, unique: object,
                                              tmp_path: Path) -> None:
    """SIGTERM (task killed, container stopped): exit 143 and the channels are released at once, not after the
    client timeout, so the next run can start reading immediately."""
    src, tunnel = unique("src"), unique("tun")  # type: ignore[operator]
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 1000)
    args = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", str(tmp_path), "--phase",
            "full", "--records-per-channel", "50", "--heartbeat-interval", "1", "--client-timeout", "300"]
    stopped = run_consumer(tablestore_emulator, args, kill_when=KILL_IN_ROUND_2, sigterm_driver=True)
    assert stopped.killed and stopped.returncode == 143, stopped.output[-3000:]
    assert "terminated by SIGTERM" in stopped.output
    channels = tablestore_tunnel_client.describe_tunnel(src, tunnel).channels
    assert channels and all(not c.client_id for c in channels)  # released despite the 300 s client timeout
