"""The consumer on a real Spark standalone cluster (issue 11, item 8): a master and two workers on 127.0.0.1
started from the pip PySpark (``spark-class``), the consumer submitted to ``spark://`` in client mode the way
the DAG does it (separate executor JVMs and Python workers; the provider installed in the executors' Python,
as in the docker image), one worker SIGKILLed mid-round, and the replica exact afterwards."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_replica, make_source, replica_differences

from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer import application_path

from .spark_runs import BIN, FAST_JVM, consumer_env

pytestmark = pytest.mark.slow
ROWS = 3000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """A ``spark-class`` daemon in its own process group, its output collected."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(BIN / "spark-class"), *args], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in:\n" + "".join(self.lines[-60:]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker JVM and the executor it launched
            self.proc.wait(30)


@pytest.fixture
def cluster(tmp_path: Path, tablestore_emulator: EmulatorProcess) -> Iterator[tuple[str, list[Daemon]]]:
    env = consumer_env(tablestore_emulator)
    env.update(SPARK_LOCAL_DIRS=str(tmp_path / "local"), SPARK_WORKER_DIR=str(tmp_path / "work"),
               SPARK_DAEMON_JAVA_OPTS=FAST_JVM, SPARK_LOG_DIR=str(tmp_path / "logs"))
    port = free_port()
    master = Daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(free_port())], env)
    daemons = [master]
    try:
        master.wait_for(r"I have been elected leader|Starting Spark master")
        url = f"spark://127.0.0.1:{port}"
        for _ in range(2):
            daemons.append(Daemon(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores",
                                   "1", "--memory", "768m", "--webui-port", str(free_port())], env))
        for worker in daemons[1:]:
            worker.wait_for(r"Successfully registered with master")
        yield url, daemons[1:]
    finally:
        for daemon in reversed(daemons):
            daemon.kill()


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
