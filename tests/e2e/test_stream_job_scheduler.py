"""The ``tablestore_stream_job`` example DAG under a real Airflow: api-server, scheduler, dag-processor and
triggerer as separate processes with the LocalExecutor (``airflow_components``), the DAG enabled by the
repository's one-line ``dags/tablestore_stream_job.py`` with its default parameters.

The emulator's ``orders`` table has base rows and its ``orders_changes`` tunnel (the DAG's defaults), then a first
batch of changes. The test

1. unpauses the DAG: catch-up is off, so the scheduler creates the latest hour's run, whose ``create_tunnel`` finds
   the tunnel and whose Spark streaming query (``trigger(availableNow=True)``) appends the base rows and the first
   changes to ``$AIRFLOW_HOME/tablestore_stream/changes``,
2. writes more changes and triggers a run with a read limit per micro-batch,

and checks after each step that the Parquet files the file sink committed (those its ``_spark_metadata`` log
lists) hold exactly the base rows and every change written so far, each once, and that the jobs' summaries (the
tasks' XComs) count the same rows.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from replication_helpers import change_key, make_source, stream_changes, write_key

from airflow_tablestore.client.model import Record, RowWrite
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from demo import replication as demo
from testing.airflow_components import Airflow, components_env, free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DAG_ID = "tablestore_stream_job"
TABLE, TUNNEL = "orders", "orders_changes"  # the DAG's defaults: scheduled runs take no conf
ROWS = 400
LIMIT = 40  # records per micro-batch of the triggered run


def committed_files(output: Path) -> list[Path]:
    """The data files of the batches Spark's Parquet file sink committed: those its ``_spark_metadata`` log lists.

    The log holds one file per batch (``N``; every tenth a ``N.compact`` with all entries so far), each a
    version line (``v1``) and one JSON entry per file. A file written by a batch that never committed is in no
    entry, so readers of the log (``spark.read``) do not see it, and neither does this.
    """
    log = output / "_spark_metadata"
    files: set[Path] = set()
    entries = [e for e in log.iterdir() if e.name.removesuffix(".compact").isdigit()] if log.is_dir() else []
    for entry in sorted(entries, key=lambda e: int(e.name.removesuffix(".compact"))):
        version, *lines = entry.read_text(encoding="utf-8").splitlines()
        assert version == "v1", f"{entry}: unknown file sink log version {version!r}"
        for line in filter(None, lines):
            item = json.loads(line)
            path = Path(unquote(urlparse(item["path"]).path))
            if item["action"] == "add":
                files.add(path)
            else:
                files.discard(path)
    return sorted(files)


def committed_records(output: Path) -> list[Record]:
    tables = [pq.read_table(path) for path in committed_files(output)]
    return arrow_to_records(pa.concat_tables(tables)) if tables else []


def assert_exactly(records: list[Record], changes: list[RowWrite]) -> None:
    """The base rows, each once, and exactly ``changes``, each once."""
    base = Counter(write_key(w) for w in demo.initial_writes(TABLE, ROWS))
    got_base = Counter(change_key(r.action.name, r.primary_key, r.columns) for r in records if r.sequence is None)
    assert sum(got_base.values()) == ROWS and got_base == base
    assert stream_changes(records) == Counter(write_key(w) for w in changes)
    assert len(records) == ROWS + len(changes)


def job_summary(airflow: Airflow, run_id: str) -> dict[str, Any]:
    """The ``stream_changes`` task's XCom: the job's summary (its ``--summary-file``)."""
    entry = airflow.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/stream_changes/xcomEntries/return_value")
    value = entry.get("value")
    summary = json.loads(value) if isinstance(value, str) else value
    assert isinstance(summary, dict), entry
    return summary


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorProcess]:
    """An emulator whose ``orders`` table has ROWS base rows and the ``orders_changes`` tunnel."""
    with EmulatorProcess(data_dir=tmp_path / "emulator", extra_args=[
            "--stream-partitions", "2", "--base-channel-rows", "150"]) as emu:
        with TunnelClient(**emu.client_kwargs) as tunnel_client:
            make_source(TableClient(**emu.client_kwargs), tunnel_client, TABLE, TUNNEL, ROWS)
        yield emu


def test_each_scheduled_run_appends_the_changes_since_the_last(emulator: EmulatorProcess, tmp_path: Path) -> None:
    client = TableClient(**emulator.client_kwargs)
    gone: set[int] = set()  # rows deleted once are never written again: every write is one stream record
    first = demo.write_changes(client, TABLE, ROWS, 150, gone=gone)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "tablestore_stream_job.py").write_text((REPO / "dags" / "tablestore_stream_job.py").read_text())
    home = tmp_path / "airflow"
    port = free_port()
    env = components_env(home, emulator, dags, port)
    # The dev venv installs the package editable, which PySpark's lookup of pyspark_* modules cannot see (the job
    # uses format("tablestore") with no registration line); a regular install puts pyspark_tablestore.py in
    # site-packages, as this path does here.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    output = home / "tablestore_stream" / "changes"  # the DAG's default output path, under $AIRFLOW_HOME
    airflow = Airflow(env, home, port, DAG_ID)
    airflow.start()
    try:
        # 1. unpause (catchup off: the scheduler creates the latest interval's run, with the default parameters)
        airflow.call("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        first_runs = airflow.wait_runs_done()
        assert first_runs and all(r["state"] == "success" for r in first_runs), first_runs
        assert any(r["run_type"] == "scheduled" for r in first_runs), first_runs
        after_first = committed_records(output)
        # 2. more changes, then a triggered run reading at most LIMIT records per micro-batch
        second = demo.write_changes(client, TABLE, ROWS, 100, offset=1, gone=gone)
        triggered = airflow.call("POST", f"/dags/{DAG_ID}/dagRuns",
                                 {"logical_date": None, "conf": {"max_records_per_trigger": LIMIT}})
        runs = airflow.wait_runs_done()
        summaries = {r["dag_run_id"]: job_summary(airflow, r["dag_run_id"]) for r in runs}
        tis = [ti for r in runs for ti in airflow.task_instances(r["dag_run_id"])]
    finally:
        airflow.stop()

    assert len(runs) >= 2 and all(r["state"] == "success" for r in runs), runs
    assert [(ti["dag_run_id"], ti["task_id"]) for ti in tis if ti["try_number"] > 1] == []  # no retries
    # after the first run: the base rows and the first changes; after the second: every change, each once
    assert_exactly(after_first, first)
    assert_exactly(committed_records(output), first + second)
    # the jobs' summaries count the same rows; the triggered run read in batches of at most LIMIT records
    assert sum(s["rows"] for s in summaries.values()) == ROWS + len(first) + len(second), summaries
    summary = summaries[triggered["dag_run_id"]]
    assert summary["batches"] >= math.ceil(summary["rows"] / LIMIT), summary
    assert summary["table"] == TABLE and summary["output"] == str(output), summary
    # create_tunnel found the tunnel the test made (idempotent by name): still the table's only one
    with TunnelClient(**emulator.client_kwargs) as tunnel_client:
        assert [t.tunnel_name for t in tunnel_client.list_tunnels(TABLE)] == [TUNNEL]
