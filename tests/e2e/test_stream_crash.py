"""The streaming source under crashes (issue 20, item 5): a user's streaming job (``stream_job.py``, spark-submit,
``trigger(availableNow=True)``) is SIGKILLed with its whole process group at >= 10 moments per phase — inside
reads (after the n-th ReadRecords answer), during the sink write (later after a read), and between Spark's commit
and the tunnel checkpoint (after the n-th lookup of a span end, and after a checkpoint) — the source emulator is
SIGKILLed and restarted mid-run 3 times while changes keep coming, and a last run goes on while ~10% of every
request fails. Two queries run in the job one after the other (taking turns to go first), each on its own tunnel of
the table: one into Spark's Parquet file sink, one through a ``foreachBatch`` sink that writes by batch id; each
must then hold the base rows and every change exactly once.

Opt-in like the consumer's crash matrix: ``make test-crash`` (and ``.ci/run``).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from replication_helpers import make_source, snapshot, stream_changes, write_key

from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
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

# dozens of streaming queries killed and restarted: longer than the suite's 600 s default on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

JOB = str(Path(__file__).with_name("stream_job.py"))
KILLS_PER_PHASE = 6
EMULATOR_RESTARTS = 3
# one read task per batch: a kill can land between two spans of one task (the first span's end stored)
SOURCE_OPTIONS = ["heartbeat_interval=1", "client_timeout=4", "settle_ms=300", "channel_wait_s=120",
                  "max_tasks_per_batch=1"]
EMULATOR_ARGS = ["--base-channel-rows", "300", "--stream-partitions", "2", "--max-read-records", "40",
                 "--log-level", "DEBUG"]
READ, CHECKPOINT, SPAN_END = "/tunnel/readrecords", "/tunnel/checkpoint", "/GetRow"


SINKS = ("files", "foreach")


@dataclasses.dataclass
class Job:
    emulator: EmulatorProcess
    output: Path
    checkpoint: Path
    report: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    launches: int = 0

    def launch(self, options: list[str]) -> subprocess.Popen[str]:
        self.launches += 1  # the queries take turns to run first, so that kills reach both
        order = SINKS if self.launches % 2 else SINKS[::-1]
        cmd = [str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--driver-java-options", FAST_JVM, JOB, ",".join(order), "orders", str(self.output),
               str(self.checkpoint), *SOURCE_OPTIONS, *options]
        return subprocess.Popen(cmd, env=consumer_env(self.emulator), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def run_clean(self, options: list[str], attempts: int = 1) -> str:
        """A run that must succeed (``attempts`` > 1: the retries a scheduler makes, for runs under faults)."""
        out = ""
        for attempt in range(1, attempts + 1):
            code, out = finish(self.launch(options))
            if code == 0:
                assert "STREAM_SUMMARY" in out, digest(out)
                return out
            assert attempt < attempts, digest(out)
            self.report.append({"rerun_after_failure": out[-600:]})
        raise AssertionError("unreachable")

    def run_killed(self, options: list[str], kill: Kill) -> None:
        proc = self.launch(options)
        code, out, fired = finish_or_kill(self.emulator, proc, kill)
        if fired:
            wait_until_gone(proc.pid)
        else:
            assert code == 0, digest(out)
        self.report.append(dataclasses.asdict(kill))

    def kill_phase(self, phase: str, rng: random.Random, options: list[str],
                   before: Any = lambda: None) -> None:
        reached = 0
        for kill in kill_plan(phase, rng, 4 * KILLS_PER_PHASE):
            before()
            self.run_killed(options, kill)
            reached += kill.reached != COMPLETED
            if reached == KILLS_PER_PHASE:
                return

    def restart_mid_run(self, after_reads: int) -> str:
        proc = self.launch([])
        outcome = "run completed before the restart point"
        if restart_after_reads(self.emulator, proc, after_reads):
            outcome = f"emulator SIGKILLed after read {after_reads} and restarted"
        code, out = finish(proc)
        if code != 0:
            self.run_clean([], attempts=3)
            outcome += "; the job failed and its rerun succeeded"
        else:
            outcome += "; the job rode it out"
        self.report.append({"phase": "incremental", "emulator_restart": outcome})
        return outcome


def digest(out: str) -> str:
    """A failed job's output, shortened: its error lines (without Java stack frames), then its end."""
    errors = [line for line in out.splitlines()
              if re.search(r"Error|Exception|Traceback|File \"|STREAM_", line) and not line.lstrip().startswith("at ")]
    return "\n".join(errors[:80]) + "\n...\n" + out[-2500:]


def kill_plan(phase: str, rng: random.Random, count: int) -> list[Kill]:
    """Kills cycling over reads, sink writes (later after a read) and the commit-to-checkpoint window."""
    kills = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            kills.append(Kill(phase, READ, rng.randint(1, 12), rng.uniform(0, 0.1)))
        elif kind == 1:
            kills.append(Kill(phase, READ, rng.randint(2, 12), rng.uniform(0.1, 0.6)))
        elif kind == 2:  # the driver looks up span ends right after Spark committed, before checkpointing
            kills.append(Kill(phase, SPAN_END, rng.randint(1, 6), rng.uniform(0, 0.02)))
        else:
            kills.append(Kill(phase, CHECKPOINT, rng.randint(1, 4), rng.uniform(0, 0.02)))
    return kills


def committed_files(output: Path) -> list[Path]:
    """The files of the Parquet file sink's committed batches (its ``_spark_metadata`` log)."""
    log = output / "_spark_metadata"
    entries: dict[int, Path] = {}
    for path in log.iterdir():
        name = path.name.removesuffix(".compact")
        if name.isdigit():
            entries[int(name)] = path
    latest_compact = max((b for b, p in entries.items() if p.name.endswith(".compact")), default=-1)
    files: set[str] = set()
    for batch in sorted(entries):
        if batch < latest_compact:
            continue
        for line in entries[batch].read_text().splitlines()[1:]:
            item = json.loads(line)
            if item.get("action", "add") == "add":
                files.add(item["path"])
    return [Path(f.removeprefix("file:")) for f in sorted(files)]


def read_output(job: Job, sink: str) -> list[Any]:
    if sink == "files":
        paths = committed_files(job.output / "files")
    else:
        paths = [p for d in (job.output / "foreach").iterdir() if d.name.startswith("batch_id=")
                 for p in d.glob("*.parquet")]
    tables = [pq.read_table(str(p)) for p in paths]
    tables = [t for t in tables if t.num_rows]
    return arrow_to_records(pa.concat_tables(tables)) if tables else []


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorProcess]:
    with EmulatorProcess(data_dir=tmp_path / "data", extra_args=EMULATOR_ARGS) as emu:
        yield emu


def test_stream_crashes(emulator: EmulatorProcess, tmp_path: Path) -> None:
    client = TableClient(**emulator.client_kwargs)
    tunnels = TunnelClient(**emulator.client_kwargs)
    make_source(client, tunnels, "orders", f"feed_{SINKS[0]}", ROWS)
    for sink in SINKS[1:]:
        tunnels.create_tunnel("orders", f"feed_{sink}")
    expected_base = snapshot(client, "orders")
    job = Job(emulator, tmp_path / "out", tmp_path / "checkpoint")
    rng = random.Random(20261126)

    # small batches: the base data takes many micro-batches, so the phase outlives its kills
    job.kill_phase("full", rng, ["max_records_per_trigger=150"])
    writer = SourceWriter(client, "orders")
    writer.burst()
    with writer:  # changes keep coming during the killed incremental runs
        job.kill_phase("incremental", rng, ["max_records_per_trigger=100"], before=lambda: writer.burst(150))
    restarts = 0
    for attempt in range(2 * EMULATOR_RESTARTS):
        if restarts == EMULATOR_RESTARTS:
            break
        writer.burst(400)
        restarts += "restarted" in job.restart_mid_run(after_reads=1 + attempt % 2)
    writer.burst()
    add_random_faults(emulator, seed=3)
    try:
        out = job.run_clean([], attempts=5)  # the catch-up under ~10% faults
    finally:
        emulator.control.clear_faults()
    job.report.append({"phase": "catch-up", "faults": "~10% of every request", "summary": out[-300:]})
    time.sleep(4)  # requests the faults held land late
    job.run_clean([])  # and whatever was written since: everything

    report = json.dumps(job.report, indent=1)
    (tmp_path / "stream-crash-report.json").write_text(report)
    reached = [r for r in job.report if "path" in r and r["reached"] != COMPLETED]
    restarted = [r for r in job.report if "restarted" in r.get("emulator_restart", "")]
    print(f"\nstreaming source crash test: {len(reached)} kills, {len(restarted)} emulator restarts\n{report}")
    for sink in SINKS:
        records = read_output(job, sink)
        assert base_rows(records) == expected_base, sink
        assert len([r for r in records if r.sequence is None]) == ROWS, sink  # no base row twice
        assert stream_changes(records) == Counter(write_key(w) for w in writer.writes), sink  # each change once
    for phase in ("full", "incremental"):
        assert sum(1 for r in reached if r["phase"] == phase) >= KILLS_PER_PHASE, report
    assert len(restarted) >= EMULATOR_RESTARTS, report
