"""A Spark standalone cluster on 127.0.0.1 from the pip PySpark (``spark-class``): a master and workers, each
daemon in its own process group, so a worker is killed with the executors it launched (a helper module)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from testing.airflow_components import free_port
from testing.jvm import FAST_JVM

from .spark_runs import BIN


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
        """SIGKILL the daemon's process group: a worker JVM, the executors it launched and their Python workers."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class SparkCluster:
    """``with SparkCluster(workdir, env) as cluster: cluster.url``: a master and ``workers`` workers started with
    ``worker_args`` (cores and memory); :meth:`start_worker` adds one (a restart after :meth:`Daemon.kill`)."""

    def __init__(self, workdir: Path, env: dict[str, str], *, workers: int = 1,
                 worker_args: Sequence[str] = ("--cores", "1", "--memory", "768m")) -> None:
        self.env = dict(env)
        self.env.update(SPARK_LOCAL_DIRS=str(workdir / "local"), SPARK_WORKER_DIR=str(workdir / "work"),
                        SPARK_DAEMON_JAVA_OPTS=FAST_JVM, SPARK_LOG_DIR=str(workdir / "logs"))
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.count, self.worker_args = workers, list(worker_args)
        self.daemons: list[Daemon] = []
        self.workers: list[Daemon] = []

    def __enter__(self) -> SparkCluster:
        try:
            master = Daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                             str(self.port), "--webui-port", str(free_port())], self.env)
            self.daemons.append(master)
            master.wait_for(r"I have been elected leader|Starting Spark master")
            for _ in range(self.count):
                self.start_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self) -> Daemon:
        worker = Daemon(["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", *self.worker_args,
                         "--webui-port", str(free_port())], self.env)
        self.daemons.append(worker)
        self.workers.append(worker)
        worker.wait_for(r"Successfully registered with master")
        return worker

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.kill()

    def __exit__(self, *exc: object) -> None:
        self.stop()
