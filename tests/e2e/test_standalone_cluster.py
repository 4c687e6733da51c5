"""The consumer on a real Spark standalone cluster (issue 11, item 8): a master and two workers on 127.0.0.1
started from the pip PySpark (``spark-class``), the consumer submitted to ``spark://`` in client mode the way
the DAG does it (separate executor JVMs and Python workers; the provider installed in the executors' Python,
as in the docker image), one worker SIGKILLed mid-round, and the replica exact afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_replica, make_source, replica_differences

from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer.job import application_path
from testing.jvm import FAST_JVM

from .spark_cluster import Daemon, SparkCluster
from .spark_runs import BIN, consumer_env

pytestmark = pytest.mark.slow
ROWS = 3000


@pytest.fixture
def cluster(tmp_path: Path, tablestore_emulator: EmulatorProcess) -> Iterator[tuple[str, list[Daemon]]]:
    with SparkCluster(tmp_path, consumer_env(tablestore_emulator), workers=2) as spark:
        yield spark.url, spark.workers


def test_consumer_survives_a_worker_killed_mid_round(cluster: tuple[str, list[Daemon]],
                                                     tablestore_emulator: EmulatorProcess, tablestore_client: Any,
                                                     tablestore_tunnel_client: Any, unique: Any) -> None:
    url, workers = cluster
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    make_replica(tablestore_client, src, dst)
    cmd = [str(BIN / "spark-submit"), "--master", url, "--deploy-mode", "client",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.executor.memory=512m", "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
           "--driver-java-options", FAST_JVM, application_path(),
           "--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "tablestore", "--sink-table", dst,
           "--records-per-channel", "100", "--heartbeat-interval", "1", "--client-timeout", "20"]
    proc = subprocess.Popen(cmd, env=consumer_env(tablestore_emulator), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    killed = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if not killed.is_set() and "round 2 (" in line:  # round 3 is starting: kill a worker inside it
                killed.set()
                threading.Timer(1.0, workers[0].kill).start()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code = proc.wait(600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(10)
    output = "".join(lines)
    assert code == 0, output[-6000:]
    assert killed.is_set() and workers[0].proc.poll() is not None, output[-3000:]
    assert any("Asked to launch executor" in line for line in workers[0].lines)  # it ran an executor of the job
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []
