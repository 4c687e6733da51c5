"""Two successive incremental runs with cutoffs T1 < T2 and writes on both sides of T1, with real Spark
(``ConsumerJob`` on an in-process ``local[2]`` session): the union of the outputs is exact."""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_source, snapshot, stream_changes, write_key

from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.consumer.driver import ConsumerJob, JobSummary
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from demo import replication as demo
from testing.jvm import FAST_JVM

from .spark_runs import base_rows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("test-cutoffs")
               .config("spark.ui.enabled", "false").config("spark.driver.extraJavaOptions", FAST_JVM)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    # py4j logs at INFO from an atexit hook, after pytest closed its capture streams: keep it quiet.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield session
    session.stop()


def _run(spark: Any, tablestore_emulator: EmulatorProcess, path: Path, *argv: str) -> JobSummary:
    settings = ConnectionSettings(tablestore_emulator.endpoint, tablestore_emulator.instance,
                                  tablestore_emulator.access_key_id, tablestore_emulator.access_key_secret)
    options = parse_args([*argv, "--sink", "parquet", "--sink-path", str(path), "--heartbeat-interval", "1",
                          "--records-per-channel", "60", "--idle-wait", "0.2"])
    job = ConsumerJob(options, settings, ParquetSink(str(path)), lambda: spark)
    try:
        return job.run()
    finally:
        job.close()


def test_successive_cutoffs_union_is_exact(spark: Any, tablestore_emulator: EmulatorProcess,
                                           tablestore_client: TableClient, tablestore_tunnel_client: TunnelClient,
                                           unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 600)
    base = snapshot(tablestore_client, src)
    args = ["--table", src, "--tunnel", tunnel]
    assert _run(spark, tablestore_emulator, tmp_path, *args, "--phase", "full").records == 600

    gone: set[int] = set()
    before = demo.write_changes(tablestore_client, src, 600, 200, offset=1, gone=gone)
    t1 = datetime.now(UTC)
    after = demo.write_changes(tablestore_client, src, 600, 400, offset=2, gone=gone)
    t2 = datetime.now(UTC)

    first = _run(spark, tablestore_emulator, tmp_path, *args, "--phase", "incremental", "--cutoff", t1.isoformat())
    got = stream_changes(arrow_to_records(read_change_log(str(tmp_path))))
    want_before = Counter(write_key(w) for w in before)
    want_all = want_before + Counter(write_key(w) for w in after)
    assert not (want_before - got), "a change before T1 is missing after the first run"
    assert not (got - want_all), "the first run wrote something that was never written"
    assert sum(got.values()) < len(before) + len(after), "the first run did not stop at T1"
    assert first.rounds >= 2

    _run(spark, tablestore_emulator, tmp_path, *args, "--phase", "incremental", "--cutoff", t2.isoformat())
    records = arrow_to_records(read_change_log(str(tmp_path)))
    assert stream_changes(records) == want_all  # nothing lost, nothing twice
    assert base_rows(records) == base
