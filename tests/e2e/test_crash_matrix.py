"""The crash matrix (issue 11, item 6): for both sinks, SIGKILL the whole consumer process group (spark-submit
JVM, Python driver, Python workers) at >= 10 moments per phase — right after the n-th tunnel read, sink write
or checkpoint the server answered — SIGKILL and restart the source emulator mid-run 3 times, keep writing to
the source between and during the incremental runs, and finish with a catch-up while ~10% of every emulator
request fails. Then the destination must equal the source in every row, column, version and timestamp, and
the change log must hold every change exactly once. The tablestore sink's runs purge tombstones as they go
(``--purge-tombstones-after``, issue 19 item 6): the replica stays exact with the purge on.

Opt-in for ``make test`` (it takes minutes): ``make test-crash`` runs it, and so does ``.ci/run``. The kill
positions reached are printed (run with ``-s``) and written to ``crash-matrix-report.json`` in the test's
temporary directory.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_source, replica_differences, snapshot, stream_changes, write_key

from airflow_tablestore.client.model import MAX_TIME_DEVIATION
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.consumer.job import application_path
from airflow_tablestore.spark.sinks.parquet import read_change_log
from airflow_tablestore.spark.sinks.purge import minimum_horizon_s
from testing.jvm import FAST_JVM

from .crash_tools import (
    COMPLETED,
    ROWS,
    Kill,
    SourceWriter,
    add_random_faults,
    finish,
    finish_or_kill,
    restart_after_reads,
)
from .spark_runs import BIN, base_rows, consumer_env, wait_until_gone

# dozens of spark-submit runs per sink: longer than the suite's 600 s default on a loaded 2-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

KILLS_PER_PHASE = 6
EMULATOR_RESTARTS = 3
TUNING = ["--records-per-channel", "120", "--heartbeat-interval", "1", "--client-timeout", "5", "--idle-wait", "0.3",
          "--request-timeout", "3"]
EMULATOR_ARGS = ["--base-channel-rows", "300", "--stream-partitions", "2", "--max-read-records", "40",
                 "--log-level", "DEBUG"]
READ, CHECKPOINT, SINK_WRITE = "/tunnel/readrecords", "/tunnel/checkpoint", "/BatchWriteRow"
PURGE_HORIZON = minimum_horizon_s(request_timeout=3, client_timeout=5, heartbeat_interval=1, records_per_channel=120)
"""The tablestore sink's runs purge tombstones (--purge-tombstones-after) at the smallest horizon TUNING allows."""
PURGE_REAL_S = 10.0
"""The sink emulator's clock runs PURGE_HORIZON - PURGE_REAL_S behind, so a tombstone is purged once it is this
old in real time: purges happen between the kills (longer than the 3.5 s the faults hold a request, and the 3 s
request timeout)."""
PURGE_LINE = re.compile(r"TOMBSTONE_PURGE (\{.*\})")


@dataclasses.dataclass
class World:
    source: EmulatorProcess
    sink: EmulatorProcess | None
    client: TableClient
    sink_type: str
    args: list[str]
    report: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    purged: int = 0

    def note_purges(self, output: str) -> None:
        self.purged += sum(json.loads(m.group(1))["purged"] for m in PURGE_LINE.finditer(output))

    def env(self) -> dict[str, str]:
        env = consumer_env(self.source)
        if self.sink is not None:
            env.update({"TABLESTORE_SINK_ENDPOINT": self.sink.endpoint, "TABLESTORE_SINK_INSTANCE": self.sink.instance,
                        "TABLESTORE_SINK_ACCESS_KEY_ID": self.sink.access_key_id,
                        "TABLESTORE_SINK_ACCESS_KEY_SECRET": self.sink.access_key_secret})
        return env


def launch(world: World, args: list[str]) -> subprocess.Popen[str]:
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", FAST_JVM, application_path(), *world.args, *TUNING, *args]  # args override TUNING
    return subprocess.Popen(cmd, env=world.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def run_clean(world: World, args: list[str]) -> str:
    """A run that must succeed (after kills, restarts or under faults: the runs Airflow's retries make)."""
    code, out = finish(launch(world, args))
    assert code == 0, out[-6000:]
    assert "CONSUMER_SUMMARY" in out
    world.note_purges(out)
    return out


def run_killed(world: World, args: list[str], kill: Kill) -> None:
    """Start the consumer and SIGKILL its process group at ``kill``; a run that ends first is recorded too."""
    emulator = world.source if kill.where == "source" else world.sink
    assert emulator is not None
    proc = launch(world, args)
    code, out, fired = finish_or_kill(emulator, proc, kill)
    if fired:
        wait_until_gone(proc.pid)
    else:
        assert code == 0, out[-6000:]
        world.note_purges(out)
    world.report.append(dataclasses.asdict(kill))


def kill_phase(world: World, phase: str, rng: random.Random, args: Callable[[], list[str]],
               before: Callable[[], None] = lambda: None) -> None:
    """Killed runs until KILLS_PER_PHASE kills were reached (a run can end before its kill point)."""
    reached = 0
    for kill in kill_plan(phase, world.sink_type, rng, 4 * KILLS_PER_PHASE):
        before()
        run_killed(world, args(), kill)
        reached += kill.reached != COMPLETED
        if reached == KILLS_PER_PHASE:
            return


def kill_plan(phase: str, sink_type: str, rng: random.Random, count: int) -> list[Kill]:
    """Kills cycling over reads, sink writes and checkpoint commits."""
    kills = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            kills.append(Kill(phase, READ, rng.randint(1, 8), rng.uniform(0, 0.2)))
        elif kind == 1 and sink_type == "tablestore":
            kills.append(Kill(phase, SINK_WRITE, rng.randint(1, 6), rng.uniform(0, 0.05), where="sink"))
        elif kind == 1:  # the Parquet write happens after a read, on the executor's local disk
            kills.append(Kill(phase, READ, rng.randint(2, 8), rng.uniform(0.02, 0.3)))
        else:  # between a checkpoint and the next (the Parquet sink publishes there)
            kills.append(Kill(phase, CHECKPOINT, rng.randint(1, 3), rng.uniform(0, 0.03)))
    return kills


def emulator_now(emulator: EmulatorProcess) -> str:
    return datetime.fromtimestamp(int(emulator.control.state()["now_us"]) / 1e6 + 0.001, tz=UTC).isoformat()


def restart_mid_run(world: World, args: list[str], after_reads: int) -> str:
    """SIGKILL the source emulator after the consumer's n-th read, restart it on the same port and data; the
    consumer either rides it out (retries) or fails and is run again."""
    proc = launch(world, args)
    outcome = "run completed before the restart point"
    if restart_after_reads(world.source, proc, after_reads):
        outcome = f"emulator SIGKILLed after read {after_reads} and restarted"
    code, out = finish(proc)
    world.note_purges(out)
    if code != 0:
        run_clean(world, args)
        outcome += "; the consumer failed and its rerun succeeded"
    else:
        outcome += "; the consumer rode it out"
    world.report.append({"phase": "incremental", "emulator_restart": outcome})
    return outcome


@pytest.fixture
def emulators(tmp_path: Path) -> Iterator[tuple[EmulatorProcess, EmulatorProcess]]:
    with EmulatorProcess(data_dir=tmp_path / "source-data", extra_args=EMULATOR_ARGS) as source, \
            EmulatorProcess(data_dir=tmp_path / "sink-data", instance="replica",
                            extra_args=[*EMULATOR_ARGS, "--clock-offset", f"{PURGE_REAL_S - PURGE_HORIZON}"]) as sink:
        yield source, sink


@pytest.mark.parametrize("sink_type", ["tablestore", "parquet"])
def test_crash_matrix(emulators: tuple[EmulatorProcess, EmulatorProcess], tmp_path: Path, sink_type: str) -> None:
    source, sink_emulator = emulators
    client = TableClient(**source.client_kwargs)
    tunnels = TunnelClient(**source.client_kwargs)
    sink_client = TableClient(**sink_emulator.client_kwargs)
    rng = random.Random(20261123 + len(sink_type))
    make_source(client, tunnels, "orders", "replication", ROWS)
    path = str(tmp_path / "changelog")
    if sink_type == "tablestore":
        make_replica_across(client, sink_client)  # the replica lives on another instance
        args = ["--table", "orders", "--tunnel", "replication", "--sink", "tablestore",
                "--sink-table", "orders_replica", "--purge-tombstones-after", f"{PURGE_HORIZON}"]
        world = World(source, sink_emulator, client, sink_type, args)
    else:
        args = ["--table", "orders", "--tunnel", "replication", "--sink", "parquet", "--sink-path", path]
        world = World(source, None, client, sink_type, args)
    expected_base = snapshot(client, "orders")

    # Smaller rounds in the killed full-phase runs (one ReadRecords per channel and round): the base data then
    # takes ~8 rounds, so the phase cannot finish before KILLS_PER_PHASE kills were reached (with 120 records per
    # round it took 3 rounds, and 9 kills could complete it: the runs after that end before their kill point).
    kill_phase(world, "full", rng, lambda: ["--phase", "full", "--records-per-channel", "40"])
    run_clean(world, ["--phase", "full"])

    writer = SourceWriter(client, "orders")
    writer.burst()
    with writer:  # source writes continue during the killed incremental runs
        kill_phase(world, "incremental", rng, lambda: ["--phase", "incremental", "--cutoff", emulator_now(source)],
                   before=lambda: writer.burst(150))  # enough changes that a run reaches its kill point
    restarts = 0
    for attempt in range(2 * EMULATOR_RESTARTS):  # writes between these runs (a write cut by a restart has no record)
        if restarts == EMULATOR_RESTARTS:
            break
        writer.burst(400)
        outcome = restart_mid_run(world, ["--phase", "incremental", "--cutoff", emulator_now(source)],
                                  after_reads=1 + attempt % 2)
        restarts += "restarted" in outcome
    writer.burst()
    cutoff = emulator_now(source)
    add_random_faults(source, seed=1)
    if world.sink is not None:
        add_random_faults(world.sink, seed=2)
    try:
        out = run_clean(world, ["--phase", "incremental", "--cutoff", cutoff])  # the catch-up under ~10% faults
    finally:
        source.control.clear_faults()
        if world.sink is not None:
            world.sink.control.clear_faults()
    time.sleep(4)  # requests the faults held are executed late: let them land before comparing
    world.report.append({"phase": "catch-up", "faults": "~10% of every request", "retries_logged":
                         out.count("retrying in")})

    report = json.dumps(world.report, indent=1)
    (tmp_path / "crash-matrix-report.json").write_text(report)
    reached = [r for r in world.report if "path" in r and r["reached"] != COMPLETED]
    restarts = [r for r in world.report if "restarted" in r.get("emulator_restart", "")]
    print(f"\ncrash matrix ({sink_type}): {len(reached)} kills and {len(restarts)} emulator restarts reached\n{report}")

    if sink_type == "tablestore":
        assert replica_differences(client, "orders", sink_client, "orders_replica") == []
        assert world.purged > 0, "no tombstone was purged: the purge was not exercised"
    else:
        records = arrow_to_records(read_change_log(path))
        assert base_rows(records) == expected_base
        assert stream_changes(records) == Counter(write_key(w) for w in writer.writes)  # each exactly once
    for phase in ("full", "incremental"):
        assert sum(1 for r in reached if r["phase"] == phase) >= KILLS_PER_PHASE, report
    assert len(restarts) >= EMULATOR_RESTARTS, report


def make_replica_across(source: TableClient, sink: TableClient) -> None:
    """The replica on the sink instance: the source's schema, no stream, original cell versions accepted."""
    desc = source.describe_table("orders")
    options = dataclasses.replace(desc.schema.options, max_time_deviation=MAX_TIME_DEVIATION)
    sink.create_table(dataclasses.replace(desc.schema, name="orders_replica", stream=None, options=options))

