"""Airflow's components as separate processes for end-to-end tests: api-server, scheduler, dag-processor and
triggerer with the LocalExecutor on one metadata database — PostgreSQL (``tests/e2e/postgres.py``; what a
deployment uses, and what backfills need) or, as the development setup, one SQLite file in WAL mode — driven
through the public REST API as the UI does (a helper module, not a test module)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from airflow_tablestore.emulator.testing import EmulatorProcess
from demo import replication as demo
from testing.jvm import FAST_JVM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hour_with_room(room: timedelta) -> datetime:
    """The start H of the current UTC hour, once at least ``room`` of it is left (waiting for the next hour if not).

    A test that writes history into past hours and then unpauses an hourly DAG expects the scheduler's latest
    interval to be [H-1, H): the unpause, after Airflow's start-up, must still fall in hour H."""
    now = datetime.now(UTC)
    next_hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if next_hour - now < room:
        time.sleep((next_hour - now).total_seconds() + 1)
        now = datetime.now(UTC)
    return now.replace(minute=0, second=0, microsecond=0)


def machine_settings() -> dict[str, str]:
    """What every Airflow the tests start on this machine sets, beside its own API port: its own log-server ports
    (the scheduler's and the triggerer's default to 8793 and 8794, which two Airflows of parallel test workers would
    share) and a task's Execution API timeout for a loaded 2-core machine (Airflow's 5 s default failed tasks there;
    Airflow's docs advise raising it under high load)."""
    return {
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    }


def components_env(home: Path, emulator: EmulatorProcess, dags: Path, port: int, *,
                   database_url: str | None = None) -> dict[str, str]:
    """The environment of the components (and the CLI): ``home`` as AIRFLOW_HOME, ``dags`` as the dags folder,
    the emulator as ``tablestore_default``, ``local[2]`` as ``spark_default``, the API on ``port``, the metadata
    database at ``database_url`` (default: the development setup, ``$AIRFLOW_HOME/airflow.db``)."""
    env = demo.airflow_env(home, emulator, spark_master="local[2]")
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # SQLite: four processes and the CLI share one file: wait for its lock instead of failing at once
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url or f"sqlite:///{home}/airflow.db?timeout=60",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "scheduler-e2e-test-secret",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
        "_JAVA_OPTIONS": FAST_JVM,
    })
    env.update(machine_settings())
    return env


class Airflow:
    """Airflow's components as processes, and the REST API they serve; ``dag_id`` is the DAG :meth:`start`
    waits for and the one the run helpers default to."""

    def __init__(self, env: dict[str, str], home: Path, port: int, dag_id: str) -> None:
        self.env, self.home, self.port, self.dag_id = env, home, port, dag_id
        self.base = f"http://127.0.0.1:{port}/api/v2"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.components: dict[str, subprocess.Popen[bytes]] = {}  # the latest process of each component
        self.commands: dict[str, list[str]] = {}  # each component's command line (what the supervisor reruns)
        self.restarts: list[str] = []  # components the supervisor started again after they exited
        self._lock = threading.RLock()
        self._held: set[str] = set()  # components killed on purpose, not to be restarted by the supervisor
        self._supervising = threading.Event()

    def start(self) -> None:
        self.cli("db", "migrate", timeout=300)
        if self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite:"):
            # Four processes and the CLI write one SQLite file. In the default rollback journal a reader that
            # starts to write while another process writes gets "database is locked" at once, whatever the busy
            # timeout; write-ahead logging (kept in the file) lets readers and the one writer proceed.
            with sqlite3.connect(self.home / "airflow.db") as db:
                db.execute("PRAGMA journal_mode=WAL")
        for component in (["api-server", "--port", str(self.port), "--host", "127.0.0.1"], ["scheduler"],
                          ["dag-processor"], ["triggerer"]):
            self._spawn(component)
        self.wait(lambda: self.get(f"/dags/{self.dag_id}").get("dag_id") == self.dag_id, 240,
                  "the DAG to be parsed")

    def start_api_server(self) -> None:
        """Only the api-server (pages and the REST API over a migrated database; no runs are scheduled)."""
        self.cli("db", "migrate", timeout=300)
        self._spawn(["api-server", "--port", str(self.port), "--host", "127.0.0.1"])

        def healthy() -> bool:
            try:
                return requests.get(f"http://127.0.0.1:{self.port}/api/v2/monitor/health", timeout=5).ok
            except requests.ConnectionError:
                return False

        self.wait(healthy, 180, "the api-server to answer")

    def _spawn(self, component: list[str]) -> None:
        log = (self.home / f"{component[0]}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "airflow", *component], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self.components[component[0]] = proc
        self.commands[component[0]] = component

    def supervise(self) -> None:
        """Start a component again whenever it exits, as a service manager's restart policy does (compose's
        ``restart: unless-stopped``); :attr:`restarts` lists them."""
        self._supervising.set()

        def watch() -> None:
            while self._supervising.is_set():
                with self._lock:
                    for name, proc in list(self.components.items()):
                        if name not in self._held and proc.poll() is not None and self._supervising.is_set():
                            self.restarts.append(name)
                            self._spawn(self.commands[name])
                time.sleep(2)

        threading.Thread(target=watch, daemon=True).start()

    def kill_triggerer(self) -> None:
        """SIGKILL the triggerer and its trigger runner (no shutdown, as in a crash); :meth:`start_triggerer`
        starts another."""
        with self._lock:
            self._held.add("triggerer")
            proc = self.components["triggerer"]
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(30)

    def start_triggerer(self) -> None:
        with self._lock:
            self._held.discard("triggerer")
            self._spawn(["triggerer"])

    def restart_scheduler(self, grace: float = 60) -> None:
        """Restart the scheduler as a service manager does: SIGTERM to its main process, then, after ``grace``
        seconds, SIGKILL to whatever of its process group is left (docker's stop timeout); then start another."""
        with self._lock:
            proc = self.components["scheduler"]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(grace)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            self._spawn(["scheduler"])

    def stop(self) -> None:
        self._supervising.clear()
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)

    def cli(self, *args: str, timeout: float = 120) -> str:
        done = self._run_cli(args, timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    def _run_cli(self, args: tuple[str, ...], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "airflow", *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def get(self, path: str, **params: Any) -> Any:
        try:
            response = requests.get(self.base + path, params=params, timeout=30)
        except requests.ConnectionError:
            return {}
        return response.json() if response.ok else {}

    def call(self, method: str, path: str, body: dict[str, Any]) -> Any:
        response = requests.request(method, self.base + path, json=body, timeout=30)
        assert response.ok, f"{method} {path}: {response.status_code} {response.text[:2000]}"
        return response.json()

    def wait(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(2)
        logs = "".join((self.home / f"{name}.log").read_text(errors="replace")[-3000:]
                       for name in ("scheduler", "dag-processor", "api-server")
                       if (self.home / f"{name}.log").exists())
        raise AssertionError(f"timed out waiting for {what}\n{logs}")

    def runs(self, dag_id: str | None = None) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id or self.dag_id}/dagRuns", limit=100).get("dag_runs", []))

    def wait_runs_done(self, dag_id: str | None = None, timeout: float = 900) -> list[dict[str, Any]]:
        def done() -> bool:
            runs = self.runs(dag_id)
            return bool(runs) and all(r["state"] in ("success", "failed") for r in runs)

        self.wait(done, timeout, f"the runs of {dag_id or self.dag_id} to finish")
        return self.runs(dag_id)

    def tries(self, run_id: str, task_id: str, dag_id: str | None = None) -> list[dict[str, Any]]:
        """Every try of a task instance (earlier tries from the history table, then the current one)."""
        return list(self.get(f"/dags/{dag_id or self.dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries")
                    .get("task_instances", []))

    def task_instances(self, run_id: str, dag_id: str | None = None) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id or self.dag_id}/dagRuns/{run_id}/taskInstances", limit=100)
                    .get("task_instances", []))
