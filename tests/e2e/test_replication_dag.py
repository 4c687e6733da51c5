"""The example DAG under ``airflow dags test`` with spark-submit local[2] against the emulator, both sinks."""

from __future__ import annotations

import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import replica_differences, snapshot, stream_changes, write_key

from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.sinks.parquet import read_change_log
from demo import replication as demo
from testing.jvm import FAST_JVM

from .spark_runs import base_rows

pytestmark = pytest.mark.slow
ROWS = 1200


@pytest.fixture(scope="module")
def airflow_env(tablestore_emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow-home")
    env = demo.airflow_env(home, tablestore_emulator, spark_master="local[2]")
    env["_JAVA_OPTIONS"] = FAST_JVM  # picked up by the spark-submit JVM
    demo.run_cmd("airflow db migrate", [sys.executable, "-m", "airflow", "db", "migrate"], env, 300)
    return env


def _run(env: dict[str, str], conf: dict[str, Any], log: Path) -> tuple[str, list[dict[str, Any]]]:
    time.sleep(1.1)  # the logical date (the cutoff) has whole seconds: it must not precede the last write
    output = demo.dags_test(env, datetime.now(UTC).replace(microsecond=0), conf, timeout=600, log_file=log)
    return output, demo.consumer_summaries(output)


def test_dag_replicates_into_a_tablestore_table(tablestore_emulator: EmulatorProcess, tablestore_client: TableClient,
                                                airflow_env: dict[str, str], unique: Any, tmp_path: Path) -> None:
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    demo.create_source_table(tablestore_client, src)
    demo.load_rows(tablestore_client, src, ROWS)
    conf = {"source_table": src, "destination_table": dst, "tunnel_name": tunnel, "sink_type": "tablestore",
            "records_per_channel": 400, "heartbeat_interval": 1}

    _, first = _run(airflow_env, conf, tmp_path / "interval1.log")
    full = [s for s in first if s["phase"] == "full"]
    assert full and full[0]["records"] == ROWS and not full[0]["skipped"]
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []

    writes = demo.write_changes(tablestore_client, src, ROWS, 300)
    _, second = _run(airflow_env, conf, tmp_path / "interval2.log")
    assert [s["phase"] for s in second] == ["incremental"]  # the plan task skipped the finished full phase
    assert second[0]["records"] == len(writes)
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []


def test_dag_writes_an_exact_parquet_change_log(tablestore_emulator: EmulatorProcess, tablestore_client: TableClient,
                                                tablestore_tunnel_client: TunnelClient, airflow_env: dict[str, str],
                                                unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    demo.create_source_table(tablestore_client, src)
    demo.load_rows(tablestore_client, src, ROWS)
    tablestore_tunnel_client.create_tunnel(src, tunnel)  # the DAG's create_tunnel accepts the existing tunnel
    base = snapshot(tablestore_client, src)
    writes = demo.write_changes(tablestore_client, src, ROWS, 300)  # after the tunnel's snapshot: stream records
    path = tmp_path / "changelog"
    conf = {"source_table": src, "destination_table": "unused", "tunnel_name": tunnel, "sink_type": "parquet",
            "parquet_path": str(path), "heartbeat_interval": 1}

    output, summaries = _run(airflow_env, conf, tmp_path / "run.log")
    assert [s["phase"] for s in summaries] == ["full", "incremental"]
    assert "create_destination_table" not in {k for k, v in demo.task_states(output).items() if v == "success"}
    records = arrow_to_records(read_change_log(str(path)))
    assert base_rows(records) == base
    assert stream_changes(records) == Counter(write_key(w) for w in writes)
    assert len(records) == ROWS + len(writes)
