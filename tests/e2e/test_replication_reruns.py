"""The replication DAG's runs leave nothing that blocks the next: the first run fails at each task in turn, the
cause is fixed, and the next run succeeds with no manual cleanup (``dag.test()`` in this process, spark-submit
local[2] against the emulator)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from replication_helpers import replica_differences

from airflow_tablestore.client.model import StreamSpec
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from demo import replication as demo
from testing.jvm import FAST_JVM

from .spark_runs import BIN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
ROWS = 600


def _run(dag: Any, conf: dict[str, Any]) -> tuple[str, dict[str, str | None]]:
    """One ``dag.test()`` run ending now: its state and each task's."""
    time.sleep(1.1)  # the cutoff (the logical date) has whole seconds: it must not precede the last write
    run = dag.test(logical_date=datetime.now(UTC).replace(microsecond=0), run_conf=conf)
    return run.state, {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_a_failed_run_leaves_nothing_that_blocks_the_next(tablestore_emulator: EmulatorProcess,
                                                          tablestore_client: TableClient, airflow_db: None,
                                                          monkeypatch: pytest.MonkeyPatch, unique: Any) -> None:
    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_DEFAULT", tablestore_emulator.airflow_connection_json())
    wrong = json.loads(tablestore_emulator.airflow_connection_json())
    wrong["password"] = "not-the-secret"
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_WRONG", json.dumps(wrong))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")  # spark-submit
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("_JAVA_OPTIONS", FAST_JVM)
    monkeypatch.setenv("TABLESTORE_SPARK_LOG_LEVEL", "ERROR")
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    demo.create_source_table(tablestore_client, src, stream=False)  # the user forgot the stream
    demo.load_rows(tablestore_client, src, ROWS)
    dag = replication_dag(unique("reruns"), auto_register=False)
    conf = {"source_table": src, "destination_table": dst, "tunnel_name": tunnel, "sink_type": "parquet",
            "records_per_channel": 400, "heartbeat_interval": 1, "verify_replica": True,
            "sink_tablestore_conn_id": "tablestore_default"}  # every key given: a run's conf outlives it here
    failed_at: dict[str, dict[str, str | None]] = {}

    # choose_sink: the Parquet sink without a path. Fix: the sink the run meant.
    failed_at["choose_sink"] = _run(dag, conf)[1]
    conf["sink_type"] = "tablestore"
    # create_destination_table: the destination's connection has a wrong secret. Fix: the right connection.
    failed_at["create_destination_table"] = _run(dag, conf | {"sink_tablestore_conn_id": "tablestore_wrong"})[1]
    # create_tunnel: no stream on the source (create_destination_table made the replica before it, from the
    # stream-less source). Fix: the source's stream.
    failed_at["create_tunnel"] = _run(dag, conf)[1]
    tablestore_client.update_table(src, stream=StreamSpec(enabled=True, expiration_hours=24))
    # full_phase: Spark cannot start (JAVA_HOME names no Java). Fix: JAVA_HOME.
    with monkeypatch.context() as patch:
        patch.setenv("JAVA_HOME", "/nonexistent-java")
        failed_at["full_phase"] = _run(dag, conf)[1]

    state, tasks = _run(dag, conf)  # the next run: no table dropped, no tunnel deleted, nothing reset
    assert (state, tasks["full_phase"], tasks["incremental_phase"], tasks["verify_replica"]) == (
        "success", "success", "success", "success"), tasks
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []

    demo.write_changes(tablestore_client, src, ROWS, 100)
    # incremental_phase, once the full phase is done: Spark cannot start. Fix: JAVA_HOME.
    with monkeypatch.context() as patch:
        patch.setenv("JAVA_HOME", "/nonexistent-java")
        failed_at["incremental_phase"] = _run(dag, conf)[1]
    state, tasks = _run(dag, conf)
    assert (state, tasks["full_phase"], tasks["incremental_phase"], tasks["verify_replica"]) == (
        "success", "skipped", "success", "success"), tasks
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []

    for task_id, states in failed_at.items():  # each failing run failed where it was meant to, and only there
        assert states[task_id] == "failed", (task_id, states)
        assert [t for t, s in states.items() if s == "failed"] == [task_id], states
