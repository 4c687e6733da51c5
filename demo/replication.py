"""``make demo``: replicate a 100,000-row table through the tunnel with Spark and Airflow, end to end.

Steps: start the emulator on loopback → temporary ``AIRFLOW_HOME`` + ``airflow db migrate`` → env-var
connections (``tablestore_default`` → emulator, ``spark_default`` → ``local[*]``) → source table with a stream
and 100,000 rows of mixed types → ``airflow dags test tablestore_replication`` (full + incremental phase) →
puts, updates, deletes and multi-version cells → the next interval, with the DAG's ``verify_replica`` task on: the
package's replica verifier (``airflow_tablestore.client.verify``, also ``python -m
airflow_tablestore.client.verify``) checks the destination equals the source cell for cell (all versions) →
summary. Everything started is stopped again; failures exit non-zero with the failing step and the end of its
output.

The data helpers (:func:`create_source_table`, :func:`load_rows`, :func:`write_changes`) are reused by the
end-to-end tests and the benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import (
    CellOp,
    Column,
    PrimaryKey,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    StreamSpec,
    TableOptions,
    TableSchema,
    WriteType,
)

REPO = Path(__file__).resolve().parent.parent
MAX_VERSIONS = 3
BASE_TS = 1_700_000_000_000  # ms: explicit cell versions, so versions are reproducible


class DemoError(RuntimeError):
    """A demo step failed; the message says which and why."""


# ---- data -----------------------------------------------------------------------------------------


def create_source_table(client: Any, name: str, *, stream: bool = True) -> None:
    """A table ``(region STRING, id INTEGER)`` keeping 3 versions, with a stream (unless ``stream=False``)."""
    client.create_table(TableSchema(
        name=name,
        primary_key=(PrimaryKeyColumn("region", PrimaryKeyType.STRING), PrimaryKeyColumn("id", PrimaryKeyType.INTEGER)),
        options=TableOptions(max_versions=MAX_VERSIONS, max_time_deviation=2**31 - 1),
        stream=StreamSpec(enabled=True, expiration_hours=24) if stream else None,
    ))


def pk_of(i: int) -> PrimaryKey:
    return (("region", f"r{i % 7}"), ("id", i))


def row_columns(i: int, rng: random.Random) -> tuple[Column, ...]:
    """Mixed types; every 10th row has a second version of ``score``."""
    cols = [
        Column("name", f"user-{i}-{rng.randrange(10**6)}", BASE_TS + i),
        Column("score", rng.random() * 1000, BASE_TS + i),
        Column("active", rng.random() < 0.5, BASE_TS + i),
        Column("count", rng.randrange(-(2**40), 2**40), BASE_TS + i),
        Column("blob", rng.randbytes(rng.randrange(0, 24)), BASE_TS + i),
    ]
    if i % 10 == 0:
        cols.append(Column("score", -1.0 * i, BASE_TS + i + 1))
    return tuple(cols)


def initial_writes(table: str, n: int, seed: int = 7) -> Iterator[RowWrite]:
    rng = random.Random(seed)
    for i in range(n):
        yield RowWrite(table, WriteType.PUT, pk_of(i), row_columns(i, rng))


def load_rows(client: Any, table: str, n: int, seed: int = 7, chunk: int = 5000) -> int:
    """Write rows ``0..n-1``; returns the count written."""
    written = 0
    batch: list[RowWrite] = []
    for write in initial_writes(table, n, seed):
        batch.append(write)
        if len(batch) >= chunk:
            written += client.write_rows(batch)
            batch = []
    if batch:
        written += client.write_rows(batch)
    return written


def change_writes(table: str, n_existing: int, n_changes: int, seed: int = 11, offset: int = 0,
                  gone: set[int] | None = None) -> list[RowWrite]:
    """Puts of new rows, updates (new versions, delete one version, delete all versions) and deletes.

    Different ``offset`` values give disjoint new rows. Deleted rows are never touched again (pass the same
    ``gone`` set to successive calls), so every write is a real change with exactly one stream record."""
    rng = random.Random(seed + offset)
    writes: list[RowWrite] = []
    gone = set() if gone is None else gone
    ts = BASE_TS + 10_000_000 + offset * 100_000
    for k in range(n_changes):
        kind = k % 5
        ts += 1
        if kind == 0:  # brand-new row
            i = n_existing + offset * n_changes + k
            writes.append(RowWrite(table, WriteType.PUT, pk_of(i), row_columns(i, rng)))
            continue
        i = rng.randrange(n_existing)
        while i in gone:
            i = rng.randrange(n_existing)
        if kind == 4:
            gone.add(i)
        cols: tuple[Column, ...]
        if kind == 1:  # new versions of existing columns (multi-version cells)
            cols = (Column("score", rng.random(), ts), Column("name", f"renamed-{k}", ts),
                    Column("extra", rng.randbytes(8), ts))
        elif kind == 2:  # delete the original version of one column
            cols = (Column("name", None, BASE_TS + i, CellOp.DELETE_ONE_VERSION), Column("active", True, ts))
        elif kind == 3:  # delete all versions of a column
            cols = (Column("blob", None, None, CellOp.DELETE_ALL_VERSIONS), Column("count", k, ts))
        else:
            writes.append(RowWrite(table, WriteType.DELETE, pk_of(i)))
            continue
        writes.append(RowWrite(table, WriteType.UPDATE, pk_of(i), cols))
    return writes


def write_changes(client: Any, table: str, n_existing: int, n_changes: int, seed: int = 11,
                  offset: int = 0, gone: set[int] | None = None) -> list[RowWrite]:
    """Apply :func:`change_writes` in order (a batch never holds a row twice); returns the writes."""
    writes = change_writes(table, n_existing, n_changes, seed, offset, gone)
    apply_writes(client, writes)
    return writes


def apply_writes(client: Any, writes: Sequence[RowWrite]) -> None:
    """Write in order, splitting batches so that a row appears at most once per batch."""
    batch: list[RowWrite] = []
    keys: set[PrimaryKey] = set()
    for write in writes:
        if write.primary_key in keys:
            client.write_rows(batch)
            batch, keys = [], set()
        batch.append(write)
        keys.add(write.primary_key)
    if batch:
        client.write_rows(batch)


# ---- airflow --------------------------------------------------------------------------------------


def airflow_env(home: Path, emulator: Any, *, spark_master: str = "local[*]") -> dict[str, str]:
    """Environment for ``airflow`` subprocesses: temp home, env-var connections, venv first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__", "TABLESTORE_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_TABLESTORE_DEFAULT": emulator.airflow_connection_json(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TABLESTORE_SPARK_LOG_LEVEL": "ERROR",
        "SPARK_LOCAL_IP": "127.0.0.1",  # everything runs on loopback
    })
    return env


def run_cmd(step: str, cmd: Sequence[str], env: dict[str, str], timeout: float,
            log_file: Path | None = None) -> str:
    """Run a command (output also saved to ``log_file``); raise :class:`DemoError` with the end of its
    output when it fails."""
    try:
        proc = subprocess.run(list(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, cwd=REPO)
        output = proc.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        output = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        if log_file is not None:
            log_file.write_text(output)
        raise DemoError(f"{step}: timed out after {timeout:.0f}s\n{output[-3000:]}") from None
    if log_file is not None:
        log_file.write_text(output)
    if proc.returncode != 0:
        where = f" (full output: {log_file})" if log_file is not None else ""
        raise DemoError(f"{step}: exit code {proc.returncode}{where}\n{output[-6000:]}")
    return output


def dags_test(env: dict[str, str], logical_date: datetime, conf: dict[str, Any], timeout: float = 900,
              log_file: Path | None = None) -> str:
    """``airflow dags test tablestore_replication <date> --conf ...``; fails unless the run succeeded."""
    output = run_cmd(
        f"airflow dags test (logical date {logical_date.isoformat()})",
        [sys.executable, "-m", "airflow", "dags", "test", "tablestore_replication", logical_date.isoformat(),
         "--conf", json.dumps(conf)],
        env, timeout, log_file,
    )
    return output  # `dags test` exits non-zero ("DagRun failed") when the run failed


def consumer_summaries(output: str) -> list[dict[str, Any]]:
    """The ``CONSUMER_SUMMARY`` JSON lines the Spark consumer printed."""
    out = []
    decoder = json.JSONDecoder()
    for line in output.splitlines():
        if "CONSUMER_SUMMARY " in line:
            try:
                value, _ = decoder.raw_decode(line.split("CONSUMER_SUMMARY ", 1)[1].strip())
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def verification_line(output: str) -> str | None:
    """The verdict the DAG's ``verify_replica`` task logged (``replica 'r' of 's' is equal ...``), if any."""
    for line in output.splitlines():
        if " is equal (" in line and "replica '" in line:
            return "replica '" + line.split("replica '", 1)[1].split(" [airflow", 1)[0].strip()  # no log suffix
    return None


def task_states(output: str) -> dict[str, str]:
    """Final state per task id from ``dags test`` output (best effort, for the summary)."""
    states: dict[str, str] = {}
    for line in output.splitlines():
        if "task_id=" in line and "new_state=" in line.replace(" ", ""):
            compact = line.replace(" ", "")
            tid = compact.split("task_id=", 1)[1].split(",")[0].split(")")[0].strip("'\"")
            state = compact.split("new_state=", 1)[1].split(",")[0].split(")")[0].strip("'\"")
            states[tid] = state
    return states


# ---- main -----------------------------------------------------------------------------------------


def check_prerequisites() -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise DemoError("Java 17+ is needed by Spark: install a JDK (e.g. apt-get install openjdk-17-jre)")
    if not (Path(sys.executable).parent / "spark-submit").exists():
        raise DemoError(f"spark-submit not found next to {sys.executable}: run `make venv` (pyspark extra)")
    try:
        import airflow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise DemoError(f"{exc.name} is not installed: run `make venv`") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=5_000)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    from airflow_tablestore.emulator.testing import EmulatorProcess

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="tablestore-demo-"))
    emulator = EmulatorProcess(data_dir=workdir / "emulator", extra_args=["--base-channel-rows", "25000"])
    step = "checking prerequisites"
    try:
        check_prerequisites()
        step = "starting the emulator"
        (workdir / "emulator").mkdir()
        emulator.start()
        print(f"[demo] emulator at {emulator.endpoint} (data in {workdir})", flush=True)
        from airflow_tablestore.client.table.client import TableClient

        client = TableClient(**emulator.client_kwargs)
        source, replica = "demo_source", "demo_replica"
        step = "loading the source table"
        t0 = time.monotonic()
        create_source_table(client, source)
        loaded = load_rows(client, source, args.rows)
        print(f"[demo] loaded {loaded} rows into {source} in {time.monotonic() - t0:.1f}s", flush=True)

        step = "airflow db migrate"
        env = airflow_env(workdir / "airflow", emulator)
        (workdir / "airflow").mkdir()
        run_cmd(step, [sys.executable, "-m", "airflow", "db", "migrate"], env, 300)
        conf = {"source_table": source, "destination_table": replica, "tunnel_name": "demo_tunnel",
                "sink_type": "tablestore", "verify_replica": False}

        step = "first interval (full + incremental phase)"
        s1, d1 = _run_interval(env, conf, "interval 1", workdir / "interval1.log")

        step = "writing changes"
        changes = len(write_changes(client, source, args.rows, args.changes))
        print(f"[demo] wrote {changes} changes (puts, updates, version deletes, row deletes)", flush=True)
        time.sleep(1.0)

        step = "second interval (incremental phase, then the replica verified)"
        # nothing writes to the source during the run, so the replica must equal it: the DAG's verify_replica
        # task compares them cell for cell, every version (a difference fails the run with the report)
        s2, d2 = _run_interval(env, conf | {"verify_replica": True}, "interval 2", workdir / "interval2.log")
        verdict = verification_line((workdir / "interval2.log").read_text())
        if verdict is None:
            raise DemoError(f"the DAG's verify_replica task reported no verdict (see {workdir / 'interval2.log'})")
        client.close()
        records = sum(int(s.get("records", 0)) for s in s1 + s2)
        total = time.monotonic() - started
        print("\n[demo] SUCCESS: destination equals source cell for cell (all versions)")
        print(f"[demo]   verify_replica: {verdict}")
        for label, summaries, wall in (("interval 1", s1, d1), ("interval 2", s2, d2)):
            for s in summaries:
                if s["skipped"]:
                    print(f"[demo]   {label}: {s['phase']:<11} nothing to do (checked in {s['seconds']:.1f}s)")
                    continue
                prof = s.get("profile", {})
                work = sum(prof.get(k, 0.0) for k in ("plan", "spark_round", "checkpoint")) or s["seconds"]
                print(f"[demo]   {label}: {s['phase']:<11} {s['records']:>7} records, {s['rounds']} round(s), "
                      f"{work:.1f}s in rounds = {s['records'] / work:,.0f} rec/s "
                      f"(job {s['seconds']:.1f}s incl. Spark start-up {prof.get('spark_start', 0.0):.1f}s)")
            print(f"[demo]   {label}: airflow dags test wall time {wall:.1f}s")
        print(f"[demo]   records consumed: {records}; total demo time {total:.1f}s")
        return 0
    except DemoError as exc:
        print(f"\n[demo] FAILED while {step}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # keep the message, exit non-zero
        print(f"\n[demo] FAILED while {step}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if emulator.output:
            print("[demo] emulator output (tail):\n" + "".join(emulator.output[-30:]), file=sys.stderr)
        return 1
    finally:
        emulator.close()
        if args.keep:
            print(f"[demo] kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_interval(env: dict[str, str], conf: dict[str, Any], label: str, log_file: Path
                  ) -> tuple[list[dict[str, Any]], float]:
    """``airflow dags test`` for an interval ending now: the consumer summaries and the wall time."""
    started = time.monotonic()
    output = dags_test(env, datetime.now(UTC).replace(microsecond=0), conf, log_file=log_file)
    wall = time.monotonic() - started
    summaries = consumer_summaries(output)
    print(f"[demo] {label} done in {wall:.1f}s: {_fmt(summaries)}", flush=True)
    return summaries, wall


def _fmt(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return "no consumer ran (phases already complete)"
    return "; ".join(
        f"{s['phase']}: {'skipped' if s['skipped'] else str(s['records']) + ' records'} in {s['seconds']:.1f}s"
        for s in summaries
    )


if __name__ == "__main__":
    sys.exit(main())
