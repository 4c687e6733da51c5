"""The streaming source (``spark.readStream.format("tablestore")``) against the consumer's incremental phase:
draining the same stream changes of one table, same run, same ``local[2]`` session.

Run: ``.venv/bin/python -m benchmarks.bench_stream [--rows 50000] [--changes 50000] [--reps 3] [--quick]``

One emulator process; the demo source table (``demo/replication.py``: 2-column key, mixed types, 3 versions, a
stream) with ``rows`` base rows and two BaseAndStream tunnels on it, one per path (two tunnels of one table see
the same changes). Untimed first: the consumer's full phase on its tunnel, and one ``availableNow`` query of the
source on the other (the query's checkpoint location is kept, so later runs read only new changes). Then
``reps`` repetitions, each writing ``changes`` new stream changes (puts of new rows, updates, deletes; untimed)
and timing, in alternating order, how long each path takes to drain them:

1. **baseline** — the consumer's incremental phase (``ConsumerJob``, ``--cutoff`` = the emulator's now, Parquet
   change-log sink), the code ``spark-submit`` runs;
2. the streaming source with ``trigger(availableNow=True)`` into Spark's ``noop`` sink (every row
   materialised), default options unless ``--source-option KEY VALUE`` is given.

Checks: the consumer reports exactly ``changes`` records; the source's ``numInputRows`` (summed over the
query's ``recentProgress``) is exactly ``changes``. Results go to ``benchmarks/results/stream.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from airflow_tablestore.spark.consumer.driver import ConsumerJob, JobSummary
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from benchmarks.common import SparkBench, spark_bench
from demo import replication as demo

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "stream.md"
TABLE = "bench_stream"
CONSUMER_TUNNEL = "consumer"
SOURCE_TUNNEL = "source"
QUERY_TIMEOUT_S = 600
DURATIONS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets",
             "triggerExecution")
DURATION_NOTES = {
    "latestOffset": ": plan the batch (includes a planner-side `settle_ms` wait, if any)",
    "addBatch": ": the Spark job (read tasks → Arrow → `noop`)",
    "commitOffsets": ": Spark's commit log + the source's `commit` (server checkpoints)",
    "triggerExecution": ": whole triggers",
}


@dataclass
class SourceRun:
    """One ``availableNow`` query: its wall time and what ``recentProgress`` says of it."""

    seconds: float
    rows: int
    batches: int
    """Micro-batches that read rows."""
    triggers: int
    """Progress entries (batches, including ones with no rows)."""
    durations_ms: dict[str, float] = field(default_factory=dict)
    """Spark's ``durationMs`` of the query's progress entries, summed per phase."""
    start_s: float = 0.0
    """From building the query to its first trigger (Spark's query set-up, the source's planner process)."""
    stop_s: float = 0.0
    """From the end of the last trigger with rows to the query's end (the trigger that finds nothing more:
    checkpoints of the last batch, the session's close; then the query's stop)."""


@dataclass
class Rep:
    order: tuple[str, str]
    consumer: JobSummary
    consumer_s: float
    source: SourceRun
    idle_consumer_s: float
    """The consumer's incremental phase again, with no new change (its fixed cost)."""
    idle_source: SourceRun
    """The source's availableNow query again, with no new change (its fixed cost)."""


class StreamBench:
    """Both paths over one table: the consumer on tunnel ``consumer``, the source on tunnel ``source``."""

    def __init__(self, bench: SparkBench, args: argparse.Namespace) -> None:
        self.bench = bench
        self.args = args
        self.sink = ParquetSink(str(bench.work / "consumer-log"))
        self.checkpoint = bench.work / "source-checkpoint"

    def consumer(self, phase: str) -> tuple[JobSummary, float]:
        """Run one phase of the consumer; ``incremental`` with the cutoff = the emulator's now."""
        argv = ["--table", TABLE, "--tunnel", CONSUMER_TUNNEL, "--phase", phase, "--sink", "parquet",
                "--sink-path", self.sink.path, "--records-per-channel", str(self.args.records_per_channel),
                "--heartbeat-interval", "5", "--client-timeout", "120"]
        if phase == "incremental":
            now_us = int(self.bench.emulator.control.state()["now_us"])
            argv += ["--cutoff", datetime.fromtimestamp(now_us / 1e6 + 0.001, tz=UTC).isoformat()]
        started = time.perf_counter()
        job = ConsumerJob(parse_args(argv), self.bench.settings, self.sink, self.bench.spark)
        try:
            summary = job.run()
        finally:
            job.close()
        return summary, time.perf_counter() - started

    def source(self) -> SourceRun:
        """One ``availableNow`` query of the source into the ``noop`` sink, with the benchmark's checkpoint."""
        spark = self.bench.spark()
        wall_started = time.time()
        started = time.perf_counter()
        reader = spark.readStream.format("tablestore").options(**self.bench.connection) \
            .option("table", TABLE).option("tunnel", SOURCE_TUNNEL)
        for key, value in self.args.source_option:
            reader = reader.option(key, value)
        query = reader.load().writeStream.format("noop").option("checkpointLocation", str(self.checkpoint)) \
            .trigger(availableNow=True).start()
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            query.stop()
            raise RuntimeError(f"the availableNow query did not finish within {QUERY_TIMEOUT_S}s")
        seconds = time.perf_counter() - started
        wall_ended = time.time()
        if query.exception() is not None:
            raise RuntimeError(f"the availableNow query failed: {query.exception()}")
        progress = query.recentProgress
        rows = [int(p["numInputRows"]) for p in progress]
        durations: dict[str, float] = dict.fromkeys(DURATIONS, 0.0)
        for p in progress:
            for key, ms in (p["durationMs"] or {}).items():
                if key in durations:
                    durations[key] += float(ms)
        run = SourceRun(seconds, sum(rows), sum(1 for r in rows if r), len(rows), durations)
        if progress:
            first, last = _epoch_s(progress[0]["timestamp"]), _epoch_s(progress[-1]["timestamp"])
            run.start_s = first - wall_started
            run.stop_s = wall_ended - last - float(progress[-1]["durationMs"]["triggerExecution"]) / 1000
        return run


def _epoch_s(timestamp: str) -> float:
    """A progress entry's ``timestamp`` (ISO 8601, UTC, e.g. ``2026-01-02T03:04:05.678Z``) in epoch seconds."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000, help="base rows of the table")
    parser.add_argument("--changes", type=int, default=50_000, help="stream changes drained per repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--records-per-channel", type=int, default=50_000, help="the consumer's (its default)")
    parser.add_argument("--source-option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                        help="an extra option of the streaming source (repeatable; profiling)")
    parser.add_argument("--quick", action="store_true", help="5,000 base rows and 5,000 changes (smoke run)")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/stream.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.changes = 5_000, 5_000
    if args.reps * args.changes // 5 >= args.rows:
        parser.error("every 5th change deletes a base row for good: --rows must exceed reps * changes / 5")
    total_started = time.monotonic()
    with spark_bench("stream") as bench:
        print(f"loading {args.rows} rows ...", flush=True)
        started = time.monotonic()
        demo.create_source_table(bench.tables, TABLE)
        demo.load_rows(bench.tables, TABLE, args.rows)
        load_s = time.monotonic() - started
        bench.tunnels.create_tunnel(TABLE, CONSUMER_TUNNEL)
        bench.tunnels.create_tunnel(TABLE, SOURCE_TUNNEL)
        run = StreamBench(bench, args)

        bench.spark()
        base, base_s = run.consumer("full")
        if base.records != args.rows:
            raise RuntimeError(f"the consumer's full phase delivered {base.records} rows, expected {args.rows}")
        print(f"base data: consumer full phase {base_s:.1f}s", flush=True)
        first = run.source()
        if first.rows != args.rows:
            raise RuntimeError(f"the source's first query delivered {first.rows} rows, expected {args.rows}")
        print(f"base data: source availableNow {first.seconds:.1f}s ({first.batches} batches)", flush=True)

        gone: set[int] = set()  # a deleted row is never written again: every write is one stream record
        reps: list[Rep] = []
        write_s: list[float] = []
        for rep in range(args.reps):
            started = time.monotonic()
            demo.write_changes(bench.tables, TABLE, args.rows, args.changes, offset=rep + 1, gone=gone)
            write_s.append(time.monotonic() - started)
            order = ("consumer", "source") if rep % 2 == 0 else ("source", "consumer")
            consumer: tuple[JobSummary, float] | None = None
            source: SourceRun | None = None
            for path in order:
                if path == "consumer":
                    consumer = run.consumer("incremental")
                    if consumer[0].records != args.changes:
                        raise RuntimeError(f"the consumer delivered {consumer[0].records} changes, "
                                           f"expected {args.changes}")
                else:
                    source = run.source()
                    if source.rows != args.changes:
                        raise RuntimeError(f"the source delivered {source.rows} changes (numInputRows), "
                                           f"expected {args.changes}")
            assert consumer is not None and source is not None
            idle_consumer, idle_consumer_s = run.consumer("incremental")
            idle_source = run.source()
            if idle_consumer.records or idle_source.rows:
                raise RuntimeError("a run with no new change delivered records")
            result = Rep(order, consumer[0], consumer[1], source, idle_consumer_s, idle_source)
            reps.append(result)
            print(f"rep {rep + 1} ({' then '.join(order)}): consumer {result.consumer_s:.2f}s "
                  f"({args.changes / result.consumer_s:,.0f} rec/s, {result.consumer.rounds} rounds), source "
                  f"{source.seconds:.2f}s ({args.changes / source.seconds:,.0f} rec/s, {source.batches} batches "
                  f"of {source.triggers} triggers) = {result.consumer_s / source.seconds:.2f}x "
                  f"[written in {write_s[-1]:.1f}s]; no new change: consumer {idle_consumer_s:.2f}s, source "
                  f"{idle_source.seconds:.2f}s", flush=True)
            print(f"  consumer profile {_fmt(result.consumer.profile)}; source durationMs {_fmt(source.durations_ms)}"
                  f", start {source.start_s:.2f}s, stop {source.stop_s:.2f}s", flush=True)
        logged = read_change_log(run.sink.path).num_rows
        if logged != args.rows + args.reps * args.changes:
            raise RuntimeError(f"the consumer's change log holds {logged} records, expected "
                               f"{args.rows + args.reps * args.changes}")
        report = render(args, load_s, bench.startup_s, (base_s, first.seconds), write_s, reps,
                        time.monotonic() - total_started)
        print(report)
        if not args.no_write:
            RESULTS.write_text(report)
            print(f"wrote {RESULTS}")
        return 0


def _fmt(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in values.items())


def render(args: argparse.Namespace, load_s: float, startup_s: float, base: tuple[float, float],
           write_s: list[float], reps: list[Rep], total_s: float) -> str:
    n = args.changes
    command = f".venv/bin/python -m benchmarks.bench_stream --rows {args.rows} --changes {n} --reps {args.reps}"
    command += "".join(f" --source-option {k} {v}" for k, v in args.source_option)
    lines = [
        "# Spark streaming source vs the consumer's incremental phase",
        "",
        "Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        f"One emulator (4 stream partitions, default `--max-read-records`), the demo source table with "
        f"{args.rows:,} base rows (loaded in {load_s:.0f} s) and two tunnels on it, one per path; `local[2]` "
        f"session (started in {startup_s:.1f} s) shared by both. Untimed first: the consumer's full phase "
        f"({base[0]:.1f} s) and one `availableNow` query of the source ({base[1]:.1f} s) consume the base data. "
        f"Each repetition then writes {n:,} stream changes (puts, updates, deletes; "
        f"{statistics.median(write_s):.0f} s) and times each path draining them, order alternating: the "
        f"consumer's incremental phase (`ConsumerJob`, `--cutoff` = now, Parquet change-log sink, "
        f"`--records-per-channel {args.records_per_channel}`; **baseline**) and "
        "`spark.readStream.format(\"tablestore\")` with `trigger(availableNow=True)` into the `noop` sink "
        "(same checkpoint location throughout, so a run reads only the new changes"
        + (f"; options {', '.join(f'`{k}={v}`' for k, v in args.source_option)}" if args.source_option
           else f"; default options, `settle_ms` {_settle_ms(args)}") +
        "). Timed: from building the job / the query to its end (the source's includes query start and stop). "
        f"Every run delivered exactly {n:,} changes (the source: Σ `numInputRows` of its progress). 2 vCPU shared "
        f"by the emulator, Spark and other engineers' jobs (load average {os.getloadavg()[0]:.1f} at the end of "
        f"this run): compare ratios. Whole benchmark: {total_s / 60:.1f} min.",
        "",
        "| rep | order | consumer s | consumer records/s | source s | source records/s | source vs consumer |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for i, rep in enumerate(reps, 1):
        ratio = rep.consumer_s / rep.source.seconds
        ratios.append(ratio)
        lines.append(f"| {i} | {' → '.join(rep.order)} | {rep.consumer_s:.2f} | {n / rep.consumer_s:,.0f} | "
                     f"{rep.source.seconds:.2f} | {n / rep.source.seconds:,.0f} | {ratio:.2f}x |")
    consumer_rate = statistics.median(n / r.consumer_s for r in reps)
    source_rate = statistics.median(n / r.source.seconds for r in reps)
    ratio = statistics.median(ratios)
    lines += [
        "",
        f"Median: consumer {consumer_rate:,.0f} records/s, source {source_rate:,.0f} records/s; the source runs at "
        f"**{ratio:.2f}x** the consumer's speed (goal: at least 0.9x).",
        "",
        "## Where the time goes (medians over the repetitions)",
        "",
        "| consumer's incremental phase (`JobSummary.profile`) | s |",
        "|---|---:|",
    ]
    med = statistics.median
    consumer_rows = [
        ("wall", med(r.consumer_s for r in reps)),
        ("driver: heartbeat, GetCheckpoint (plan)", med(r.consumer.profile["plan"] for r in reps)),
        ("Spark jobs (wall)", med(r.consumer.profile["spark_round"] for r in reps)),
        ("tasks: ReadRecords (Σ)", med(r.consumer.profile["read"] for r in reps)),
        ("tasks: Arrow + Parquet change-log sink (Σ)", med(r.consumer.profile["sink"] for r in reps)),
        ("driver: Checkpoint + publish", med(r.consumer.profile["checkpoint"] for r in reps)),
        ("a run with no new change (wall; fixed cost)", med(r.idle_consumer_s for r in reps)),
    ]
    lines.append(f"| rounds | {med(r.consumer.rounds for r in reps):.0f} |")
    lines += [f"| {label} | {value:.2f} |" for label, value in consumer_rows]
    source_rows = [
        ("wall", med(r.source.seconds for r in reps)),
        ("before the first trigger: query start, the source's Python planner process",
         med(r.source.start_s for r in reps)),
        *((f"`{key}`" + DURATION_NOTES.get(key, ""), med(r.source.durations_ms[key] / 1000 for r in reps))
          for key in DURATIONS),
        ("after the last trigger with rows: the trigger that finds nothing (checkpoints of the batch, "
         "session close), query stop", med(r.source.stop_s for r in reps)),
        ("a run with no new change (wall; fixed cost)", med(r.idle_source.seconds for r in reps)),
    ]
    lines += [
        "",
        "| streaming source, `availableNow` (Spark's `durationMs`, Σ over the query's progress) | s |",
        "|---|---:|",
        f"| micro-batches with rows / progress entries | {med(r.source.batches for r in reps):.0f} / "
        f"{med(r.source.triggers for r in reps):.0f} |",
        *(f"| {label} | {value:.2f} |" for label, value in source_rows),
    ]
    settle_s = _settle_ms(args) / 1000
    add_batch = med(r.source.durations_ms["addBatch"] / 1000 for r in reps)
    spark_round = med(r.consumer.profile["spark_round"] for r in reps)
    source_s = med(r.source.seconds for r in reps)
    planning = med(r.source.durations_ms["latestOffset"] / 1000 for r in reps)
    logs = med(sum(r.source.durations_ms[k] for k in ("queryPlanning", "getBatch", "walCommit", "commitOffsets"))
               / 1000 for r in reps)
    lines += [
        "",
        f"Reading: moving the data — the source's Spark job (`addBatch`, `noop` sink) runs at "
        f"{n / add_batch:,.0f} records/s, the consumer's Spark round (Parquet sink) at {n / spark_round:,.0f} "
        f"records/s (the source's job at {spark_round / add_batch:.2f}x the consumer's). The rest is fixed cost "
        f"per run: {source_s - add_batch:.1f} s of the source's {source_s:.1f} s are outside `addBatch` — starting "
        f"the query ({med(r.source.start_s for r in reps):.2f} s: Spark sets the query up and starts the "
        f"source's Python planner process), planning ({planning:.2f} s of `latestOffset`: the planner's tunnel and "
        f"positions-table calls, plus any wait for the `settle_ms` of {settle_s:.1f} s that the planner does "
        f"rather than the read tasks), Spark's offset and commit logs with the source's `commit` ({logs:.2f} s) "
        f"and the end ({med(r.source.stop_s for r in reps):.2f} s) — against "
        f"{med(r.consumer_s - r.consumer.profile['spark_round'] for r in reps):.2f} s outside the consumer's Spark "
        "round. The fixed cost is paid once per query, so the ratio grows with the changes per run; a "
        "long-running query (`processingTime` trigger) pays the start once.",
        "",
    ]
    return "\n".join(lines)


def _settle_ms(args: argparse.Namespace) -> int:
    given = {k.lower(): v for k, v in args.source_option}
    return int(given.get("settle_ms", SourceOptions.settle_ms))


if __name__ == "__main__":
    sys.exit(main())
