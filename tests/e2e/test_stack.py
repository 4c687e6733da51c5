"""docker-compose.yaml's production stack run whole as processes (issue 33): Airflow's api-server, scheduler,
dag-processor and triggerer with the LocalExecutor on a throwaway PostgreSQL cluster, a Spark standalone master
and worker (``spark_default`` in client mode), and the emulator, every Airflow setting taken from the compose file
(``stack.py``; :func:`test_stack_runs_the_compose_settings` keeps the two in agreement).

The emulator's source ``orders`` has history in the past hours (as in ``test_scheduler.py``); ``orders_big``
holds enough rows for a Spark phase to last several rounds. The replication DAG's defaults write the Parquet
change log of ``orders`` to a directory the Airflow workers and the Spark worker share; the fault runs replicate
``orders_big`` into a Tablestore table (conf from the REST trigger, as the form sends it).

``test_stack_short`` (``make test``, ``.ci/run``): the scheduled run, a REST trigger with the form's parameters
(full and incremental phase on the cluster), PostgreSQL restarted, and a second run; the replica exact.

``test_stack_whole`` (``make test-stack``, ``TABLESTORE_STACK=1``) also: ``airflow backfill create`` over three
past intervals while the scheduler runs (no lock errors, retries or overlaps; each partition
exact), the Spark worker SIGKILLed with its executors during a full phase and during an incremental phase and then
restarted, the scheduler restarted (SIGTERM, start) during a run, the triggerer SIGKILLed while a sensor is
deferred, the streaming job DAG and the ``AssetWatcher`` DAG.

After every fault the run completes or fails cleanly (no task left running or queued), the next run makes the
destination exact, and no task instance's tries (the REST API's ``/tries``) overlap, nor do the Spark tasks of
different runs. Each step's wall time is printed (``-s``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import replica_differences, stream_changes, write_key

from airflow_tablestore.client.model import RowWrite
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.sinks.parquet import read_change_log
from demo import replication as demo
from testing.airflow_components import Airflow, free_port, hour_with_room, machine_settings

from .postgres import PostgresCluster, require_postgres
from .spark_cluster import SparkCluster
from .stack import (
    REPO,
    SERVICES,
    TEST_ONLY,
    compose_airflow_env,
    compose_emulator,
    compose_restart_policies,
    compose_worker_args,
    local_addresses,
    localize,
    stack_env,
    worker_env,
)
from .test_asset_watcher import documented_dag
from .test_scheduler import SENSOR_DAG

DAG_ID = "tablestore_replication"
ROWS, BIG_ROWS = 300, 6000
SPARK_TASKS = ("full_phase", "incremental_phase", "rebuild_interval")
UNFINISHED = {"running", "queued", "scheduled", "deferred", "up_for_retry", "up_for_reschedule", "restarting"}
REPLICATION_DAG = '''
from airflow_tablestore.example_dags.tablestore_replication import replication_dag

dag = replication_dag(source_table="orders", sink_type="parquet", parquet_path={path!r}, records_per_channel=500,
                      heartbeat_interval=1)
'''
FAULTS = {"source_table": "orders_big", "sink_type": "tablestore", "destination_table": "orders_big_replica",
          "tunnel_name": "faults", "records_per_channel": 100, "heartbeat_interval": 1}
"""The fault runs' parameters (the trigger form's): several rounds per phase on the emulator's 100-record answers."""


# ---- item 1: the compose file and the test agree ----------------------------------------------------------------


def test_stack_runs_the_compose_settings(tmp_path: Path) -> None:
    """Every setting docker-compose.yaml gives Airflow's components is the stack's, with the same value but for the
    service addresses; the stack adds only :data:`TEST_ONLY` and the settings every test Airflow on one machine
    needs (``machine_settings``: its own log-server ports, a longer Execution API timeout); no compose hostname is
    left; the Spark worker gets the compose file's resources; and docs/airflow.md's "Production setup" exports
    exactly the compose settings."""
    addresses = local_addresses(postgres_port=5999, api_port=8999, emulator_endpoint="http://127.0.0.1:8998",
                                spark_port=7999, dags=tmp_path / "dags")
    env = stack_env(tmp_path / "home", addresses)
    compose = compose_airflow_env()
    assert {k: env[k] for k in compose} == localize(compose, addresses)
    airflow_vars = {k for k in env if k.startswith("AIRFLOW_")}
    assert airflow_vars == ({k for k in compose if k.startswith("AIRFLOW_")} | set(TEST_ONLY) | {"AIRFLOW_HOME"}
                            | set(machine_settings()))
    assert {k for k in compose if k.startswith("AIRFLOW__")} >= {
        "AIRFLOW__CORE__EXECUTOR", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"}
    assert compose["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    for name, value in ((k, env[k]) for k in compose):
        for service in SERVICES:
            assert value != service and not re.search(rf"(//|@){re.escape(service)}\b", value), (name, value)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "postgresql+psycopg2://airflow:airflow@127.0.0.1:5999/airflow"
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert (spark["host"], spark["port"], spark["extra"]["deploy-mode"]) == ("spark://127.0.0.1", 7999, "client")
    assert compose_worker_args() == ["--cores", "2", "--memory", "2g"]
    # the compose file restarts the components that exit; the stack's supervisor does the same
    assert set(compose_restart_policies().values()) == {"unless-stopped"}
    # docs/airflow.md, "Production setup": the same settings, with the compose file's hostnames
    text = (REPO / "docs" / "airflow.md").read_text()
    section = text.split("## Production setup", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "no bash block in Production setup"
    exported = dict(re.findall(r"^export (\w+)='?(.*?)'?$", block.group(1), re.M))
    assert exported == {k: v for k, v in compose.items() if k.startswith("AIRFLOW")}, exported


# ---- the stack --------------------------------------------------------------------------------------------------


class Stack:
    """The running stack: emulator, PostgreSQL, Spark cluster, Airflow; ``log(step)`` records each step's time."""

    def __init__(self, emulator: EmulatorProcess, postgres: PostgresCluster, spark: SparkCluster,
                 airflow: Airflow, changelog: Path) -> None:
        self.emulator, self.postgres, self.spark, self.airflow, self.changelog = (emulator, postgres, spark, airflow,
                                                                                  changelog)
        self.client = TableClient(**emulator.client_kwargs)
        self.times: list[tuple[str, float]] = []
        self._mark = time.monotonic()

    def log(self, step: str) -> None:
        now = time.monotonic()
        self.times.append((step, now - self._mark))
        print(f"[stack] {step}: {now - self._mark:.0f} s", flush=True)
        self._mark = now

    # runs
    def trigger(self, conf: dict[str, Any] | None = None, dag_id: str = DAG_ID) -> str:
        run = self.airflow.call("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        return str(run["dag_run_id"])

    def run(self, run_id: str, dag_id: str = DAG_ID) -> dict[str, Any]:
        return dict(self.airflow.get(f"/dags/{dag_id}/dagRuns/{run_id}"))

    def wait_run(self, run_id: str, dag_id: str = DAG_ID, timeout: float = 900) -> str:
        """Wait for the run to end; check it ended cleanly (no task left unfinished); return its state."""
        self.airflow.wait(lambda: self.run(run_id, dag_id).get("state") in ("success", "failed"), timeout,
                          f"run {run_id} of {dag_id}")
        states = {ti["task_id"]: ti["state"] for ti in self.airflow.task_instances(run_id, dag_id)}
        assert not UNFINISHED & set(states.values()), (run_id, states)
        return str(self.run(run_id, dag_id)["state"])

    def ti_state(self, run_id: str, task_id: str) -> str | None:
        ti = self.airflow.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}")
        return ti.get("state")

    def task_log(self, run_id: str, task_id: str) -> str:
        folder = self.airflow.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
        return "".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))

    def wait_log(self, run_id: str, task_id: str, pattern: str, timeout: float = 600) -> None:
        self.airflow.wait(lambda: re.search(pattern, self.task_log(run_id, task_id)) is not None, timeout,
                          f"{pattern!r} in the log of {run_id}/{task_id}")

    def replica_exact(self, source: str = "orders_big", replica: str = "orders_big_replica") -> None:
        diff = replica_differences(self.client, source, self.client, replica)
        assert diff == [], diff

    # faults
    def kill_worker_in(self, run_id: str, task_id: str) -> None:
        """SIGKILL the Spark worker (and its executors) once ``task_id`` finished its second round, then start
        another worker; checks the task was running the application on that worker when it was killed."""
        self.wait_log(run_id, task_id, r"round 2 \(")
        time.sleep(1)
        worker = self.spark.workers[-1]
        assert self.ti_state(run_id, task_id) == "running", self.task_log(run_id, task_id)[-3000:]
        assert any("Asked to launch executor" in line for line in worker.lines), "".join(worker.lines[-40:])
        worker.kill()
        self.spark.start_worker()

    def next_run_exact(self) -> None:
        """The next run after a fault succeeds and makes the replica exact."""
        assert self.wait_run(self.trigger(FAULTS)) == "success"
        self.replica_exact()


def history(emulator: EmulatorProcess, hour: datetime) -> dict[str, list[RowWrite]]:
    """``orders``: base rows in hour H-4, changes in H-3, H-2 and H-1 (by commit time); the emulator's clock then
    brought to real time. Returns the writes per partition."""
    client = TableClient(**emulator.client_kwargs)
    demo.create_source_table(client, "orders")
    base = list(demo.initial_writes("orders", ROWS))
    demo.apply_writes(client, base)
    writes: dict[str, list[RowWrite]] = {(hour - timedelta(hours=4)).strftime("%Y%m%dT%H"): base}
    gone: set[int] = set()
    for back in (3, 2, 1):
        emulator.control.set_time((hour - timedelta(hours=back) + timedelta(minutes=10)).timestamp())
        batch = demo.change_writes("orders", ROWS, 40, offset=back, gone=gone)
        demo.apply_writes(client, batch)
        writes[(hour - timedelta(hours=back)).strftime("%Y%m%dT%H")] = batch
    emulator.control.set_time(datetime.now(UTC).timestamp())
    return writes


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Stack, dict[str, list[RowWrite]], datetime]]:
    require_postgres()
    # the whole scenario checks the past hours' partitions: PostgreSQL, a Spark cluster and Airflow start before the
    # unpause, which must still fall in hour H (the short one checks no partition)
    hour = hour_with_room(timedelta(minutes=8 if os.environ.get("TABLESTORE_STACK") else 0))
    start = hour - timedelta(hours=4) + timedelta(minutes=5)
    with EmulatorProcess(data_dir=tmp_path / "emulator", **compose_emulator(), extra_args=[
            "--clock-start", start.isoformat(), "--stream-partitions", "2", "--base-channel-rows", "500",
            "--max-read-records", "100"]) as emulator:
        writes = history(emulator, hour)
        client = TableClient(**emulator.client_kwargs)
        demo.create_source_table(client, "orders_big")
        demo.load_rows(client, "orders_big", BIG_ROWS)
        changelog = tmp_path / "changelog"  # shared by the Airflow workers and the Spark worker (compose: a volume)
        dags = tmp_path / "dags"
        dags.mkdir()
        (dags / "tablestore_replication.py").write_text(REPLICATION_DAG.format(path=str(changelog)))
        (dags / "wait_for_replication.py").write_text(SENSOR_DAG)
        (dags / "tablestore_stream_job.py").write_text((REPO / "dags" / "tablestore_stream_job.py").read_text())
        (dags / "orders_on_changes.py").write_text(documented_dag(emulator.instance))
        home = tmp_path / "airflow"
        with PostgresCluster() as postgres, SparkCluster(tmp_path / "spark", worker_env(),
                                                         worker_args=compose_worker_args()) as spark:
            port = free_port()
            env = stack_env(home, local_addresses(postgres_port=postgres.port, api_port=port,
                                                  emulator_endpoint=emulator.endpoint, spark_port=spark.port,
                                                  dags=dags))
            airflow = Airflow(env, home, port, DAG_ID)
            try:
                airflow.start()
                airflow.supervise()  # the compose file's restart policy (test_stack_runs_the_compose_settings)
                yield Stack(emulator, postgres, spark, airflow, changelog), writes, hour
            finally:
                airflow.stop()


def assert_no_concurrent_tries(airflow: Airflow, dag_ids: list[str]) -> None:
    """No task instance ran two tries at once, and the replication DAG's Spark tasks never overlapped (across runs
    and tries): from the REST API's tries of every task instance."""
    spark: list[tuple[str, str, str]] = []
    for dag_id in dag_ids:
        for run in airflow.runs(dag_id):
            for ti in airflow.task_instances(run["dag_run_id"], dag_id):
                tries = airflow.tries(run["dag_run_id"], ti["task_id"], dag_id)
                spans = sorted((t["start_date"], t["end_date"] or "9999", t["try_number"]) for t in tries
                               if t["start_date"])
                for (_, end, n), (start, _, m) in zip(spans, spans[1:], strict=False):
                    assert end <= start, f"{dag_id}/{run['dag_run_id']}/{ti['task_id']}: tries {n} and {m} overlap"
                if dag_id == DAG_ID and ti["task_id"] in SPARK_TASKS:
                    spark += [(s, e, f"{run['dag_run_id']}/{ti['task_id']}#{n}") for s, e, n in spans]
    spark.sort()
    for (_, end, a), (start, _, b) in zip(spark, spark[1:], strict=False):
        assert end <= start, f"Spark tasks {a} and {b} overlapped"


def scenario(stack: Stack, writes: dict[str, list[RowWrite]], hour: datetime, *, whole: bool) -> None:
    airflow = stack.airflow
    stack.log("stack started")
    # unpausing: catch-up is off, so the scheduler creates the latest interval's run (the DAG's defaults: the
    # Parquet change log of orders); then a REST trigger with the form's parameters (another table and tunnel,
    # the Tablestore sink): its full phase, then the stream through run_after, on the cluster
    airflow.call("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    assert stack.wait_run(stack.trigger(FAULTS)) == "success"
    stack.replica_exact()
    stack.log("triggered run (full + incremental phase on the cluster)")
    # PostgreSQL restarted between runs: the components reconnect, the next run succeeds
    gone: set[int] = set()
    demo.write_changes(stack.client, "orders_big", BIG_ROWS, 200, gone=gone)
    stack.postgres.restart()
    stack.next_run_exact()
    stack.log(f"PostgreSQL restarted between runs, next run exact (components restarted: {airflow.restarts})")
    scheduled = [r for r in airflow.wait_runs_done() if r["run_type"] == "scheduled"]
    assert scheduled and all(r["state"] == "success" for r in scheduled), scheduled
    stack.log("scheduled run")
    if whole:
        # a backfill of three past hours while the scheduler runs
        airflow.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", (hour - timedelta(hours=3)).isoformat(),
                    "--to-date", (hour - timedelta(hours=1)).isoformat())
        runs = airflow.wait_runs_done(timeout=1800)
        kinds = Counter(r["run_type"] for r in runs)
        assert kinds["backfill"] == 3 and kinds["scheduled"] >= 1, runs
        assert all(r["state"] == "success" for r in runs), runs
        tis = [ti for r in runs for ti in airflow.task_instances(r["dag_run_id"])]
        assert [(ti["dag_run_id"], ti["task_id"]) for ti in tis if ti["try_number"] > 1] == []  # no retries
        for partition, batch in writes.items():
            got = stream_changes(arrow_to_records(read_change_log(f"{stack.changelog}/interval={partition}")))
            assert got == Counter(write_key(w) for w in batch), partition
        stack.log("backfill of three intervals, partitions exact")

        # the streaming job DAG on the cluster
        airflow.call("PATCH", "/dags/tablestore_stream_job", {"is_paused": False})
        stream = airflow.wait_runs_done("tablestore_stream_job", timeout=900)
        assert stream and all(r["state"] == "success" for r in stream), stream
        output = airflow.home / "tablestore_stream" / "changes"
        assert list(output.glob("*.parquet")), list(output.iterdir()) if output.exists() else output
        stack.log("streaming job DAG")

        # the AssetWatcher DAG: changes to orders start a run
        airflow.call("PATCH", "/dags/orders_on_changes", {"is_paused": False})
        time.sleep(10)  # the watcher's trigger starts in the triggerer
        demo.write_changes(stack.client, "orders", ROWS, 60, offset=9)
        airflow.wait(lambda: any(r["state"] == "success" for r in airflow.runs("orders_on_changes")), 300,
                     "a run of orders_on_changes")
        stack.log("AssetWatcher DAG")

        # the Spark worker SIGKILLed with its executors during a full phase (a new tunnel), then restarted
        faults = dict(FAULTS, tunnel_name="faults_full", destination_table="orders_big_replica_2")
        run_id = stack.trigger(faults)
        stack.kill_worker_in(run_id, "full_phase")
        state = stack.wait_run(run_id)
        assert stack.wait_run(stack.trigger(faults)) == "success"
        stack.replica_exact(replica="orders_big_replica_2")
        stack.log(f"worker killed in a full phase (run {state}), next run exact")

        # ... and during an incremental phase
        demo.write_changes(stack.client, "orders_big", BIG_ROWS, 3000, offset=1, gone=gone)
        run_id = stack.trigger(FAULTS)
        stack.kill_worker_in(run_id, "incremental_phase")
        state = stack.wait_run(run_id)
        stack.next_run_exact()
        stack.log(f"worker killed in an incremental phase (run {state}), next run exact")

        # the scheduler restarted (SIGTERM, start) while a run's Spark task runs
        demo.write_changes(stack.client, "orders_big", BIG_ROWS, 2000, offset=2, gone=gone)
        run_id = stack.trigger(FAULTS)
        stack.wait_log(run_id, "incremental_phase", r"round 1 \(")
        assert stack.ti_state(run_id, "incremental_phase") == "running"
        airflow.restart_scheduler()
        state = stack.wait_run(run_id)
        stack.next_run_exact()
        stack.log(f"scheduler restarted during a run (run {state}), next run exact")

        # the triggerer SIGKILLed while a sensor is deferred; another triggerer takes the sensor over
        airflow.call("PATCH", "/dags/wait_for_replication", {"is_paused": False})
        sensor = stack.trigger({"table": "orders_big", "tunnel": "faults"}, "wait_for_replication")
        airflow.wait(lambda: any(ti["state"] == "deferred" for ti in
                                 airflow.task_instances(sensor, "wait_for_replication")), 180, "the sensor to defer")
        airflow.kill_triggerer()
        airflow.start_triggerer()
        time.sleep(30)  # past the sensor's cutoff (its run_after + 25 s)
        stack.next_run_exact()
        assert stack.wait_run(sensor, "wait_for_replication") == "success"
        stack.log("triggerer killed while a sensor was deferred, sensor resumed")

    assert_no_concurrent_tries(airflow, [DAG_ID, "wait_for_replication", "tablestore_stream_job",
                                         "orders_on_changes"] if whole else [DAG_ID])
    for name in ("scheduler", "dag-processor", "triggerer", "api-server"):
        log = (airflow.home / f"{name}.log").read_text(errors="replace")
        assert "database is locked" not in log, name
    stack.log(f"checks (components the supervisor restarted: {airflow.restarts})")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_stack_short(stack: tuple[Stack, dict[str, list[RowWrite]], datetime]) -> None:
    scenario(*stack, whole=False)


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.skipif(not os.environ.get("TABLESTORE_STACK"), reason="the whole stack scenario: make test-stack")
def test_stack_whole(stack: tuple[Stack, dict[str, list[RowWrite]], datetime]) -> None:
    scenario(*stack, whole=True)
