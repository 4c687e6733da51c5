"""Spark consumer (local[2]) vs one TunnelWorker process: the full phase of the same table, same run.

Run: ``.venv/bin/python -m benchmarks.bench_spark [--rows 500000] [--channel-rows 50000]``

One emulator process; a table of ``rows`` rows (int key + four small columns) read through fresh BaseData
tunnels (``rows / channel_rows`` channels), one tunnel per measurement:

1. **baseline** — one TunnelWorker in this process, counting processor (no sink);
2. TunnelWorker whose processor writes each batch to the Parquet change log (same sink code as Spark);
3. Spark consumer (``ConsumerJob`` with a ``local[2]`` session started beforehand), discarding sink;
4. Spark consumer with the Parquet change-log sink.

Every measurement must deliver exactly ``rows`` records. The profile splits the Spark runs into driver work,
task time spent in ReadRecords (emulator + HTTP + decode; split by a cProfile of one channel drain) and in
the sink, and Spark's own scheduling / Python-worker overhead. Results go to ``benchmarks/results/spark.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import ChannelStatus, Record, TunnelType
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import FINISHED, TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.processor import ChannelContext
from airflow_tablestore.client.tunnel.worker import TunnelWorker
from airflow_tablestore.spark.arrow.changes import objects_to_arrow
from airflow_tablestore.spark.consumer.driver import ConsumerJob, JobSummary
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from benchmarks.common import CountingChannelProcessor, RecordCounter, load_user_rows, spark_bench

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "spark.md"
TABLE = "bench_spark"


@dataclass(frozen=True)
class DiscardSink:
    """Counts and drops records (benchmark only: the tunnel is still checkpointed)."""

    def describe(self) -> str:
        return "discarding sink"

    def check(self) -> None:
        return None

    def open(self, channel_id: str, start_token: str, sequence: int) -> Any:
        return _Discard()

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        return None

    def recover(self, channel_id: str, token: str, sequence: int) -> None:
        return None

    def staged_channels(self) -> list[str]:
        return []


class _Discard:
    def __init__(self) -> None:
        self.count = 0
        self.refused = 0

    def write(self, records: Sequence[Record]) -> None:
        self.count += len(records)

    def close(self, end_token: str) -> int:
        return self.count

    def abort(self) -> None:
        return None


def load(tables: TableClient, rows: int) -> float:
    started = time.monotonic()
    load_user_rows(tables, TABLE, rows)
    return time.monotonic() - started


class _SinkingProcessor(CountingChannelProcessor):
    """Writes each batch to the Parquet change log (when a sink is given) before counting it."""

    def __init__(self, counter: RecordCounter, sink: ParquetSink | None) -> None:
        super().__init__(counter)
        self.sink = sink

    def process(self, records: list[Record], context: ChannelContext) -> None:
        if self.sink is not None:  # one deterministic file per (channel, start token), as the Spark sink
            # the worker hands out decoded records: the change log's table from them, staged and published as the
            # Spark sink does (its writer takes the answer's Records, built from the bytes)
            writer = self.sink.open(context.channel_id, context.start_token, 1)
            table = objects_to_arrow(records, context.channel_id, writer._chunk, 0)
            for partition, part in writer._split_table(table):
                writer._part(partition).pending.append(part)
            writer._count = table.num_rows
            end = f"{context.start_token}+{len(records)}"
            writer.close(end)
            self.sink.publish(context.channel_id, context.start_token, end, 1)  # as the Spark driver does
        super().process(records, context)


def run_worker(tc: TunnelClient, tunnel_id: str, rows: int, sink: ParquetSink | None) -> float:
    counter = RecordCounter(rows)
    config = TunnelWorkerConfig(heartbeat_interval_s=5, checkpoint_interval_s=10, client_tag="bench",
                                progress_log_interval_s=3600)
    worker = TunnelWorker(tc, tunnel_id, _SinkingProcessor(counter, sink), config)
    started = time.monotonic()
    worker.start()
    if not counter.done.wait(1800):
        raise RuntimeError(f"worker delivered only {counter.count} of {rows} records")
    elapsed = time.monotonic() - started
    worker.shutdown()
    if counter.count != rows:
        raise RuntimeError(f"worker delivered {counter.count} records, expected {rows}")
    return elapsed


def run_spark(spark: Any, settings: ConnectionSettings, tunnel: str, sink: Any, records_per_channel: int
              ) -> JobSummary:
    options = parse_args(["--table", TABLE, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", "unused", "--records-per-channel", str(records_per_channel),
                          "--heartbeat-interval", "5", "--client-timeout", "120"])
    job = ConsumerJob(options, settings, sink, lambda: spark)
    try:
        return job.run()
    finally:
        job.close()


def read_profile(tc: TunnelClient, tunnel_id: str) -> dict[str, float]:
    """cProfile one channel drain (sequential ReadRecords) and bucket its time."""
    client_id = tc.connect(tunnel_id, timeout_s=600, client_tag="bench-profile")
    channels = [c.channel_id for c in tc.heartbeat(tunnel_id, client_id, []) if c.status is ChannelStatus.OPEN]
    token, _ = tc.get_checkpoint(tunnel_id, client_id, channels[0])
    profiler = cProfile.Profile()
    profiler.enable()
    while token != FINISHED:
        token = tc.read_records(tunnel_id, client_id, channels[0], token).next_token
    profiler.disable()
    tc.shutdown(tunnel_id, client_id)
    stats = pstats.Stats(profiler)
    buckets = {"emulator (socket wait)": 0.0, "HTTP + transport": 0.0, "protobuf": 0.0, "decode": 0.0,
               "other": 0.0}
    for (filename, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "recv_into" in func or "sendall" in func or func in ("<method 'recv' of '_socket.socket' objects>",):
            buckets["emulator (socket wait)"] += tottime
        elif "plainbuffer" in filename or "records.py" in filename or "unpack" in func:
            buckets["decode"] += tottime
        elif any(k in filename for k in ("requests", "urllib3", "http/client", "transport.py", "auth.py")):
            buckets["HTTP + transport"] += tottime
        elif "protobuf" in filename or "FromString" in func or "ParseFromString" in func or "upb" in func:
            buckets["protobuf"] += tottime
        else:
            buckets["other"] += tottime
    total = sum(buckets.values()) or 1.0
    return {k: v / total for k, v in buckets.items()}


def new_tunnel(tc: TunnelClient, name: str) -> str:
    tunnel_id = tc.create_tunnel(TABLE, name, TunnelType.BASE_DATA)
    return str(tunnel_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--channel-rows", type=int, default=50_000)
    parser.add_argument("--records-per-channel", type=int, default=50_000)
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/spark.md")
    args = parser.parse_args(argv)
    with spark_bench("spark", ["--base-channel-rows", str(args.channel_rows)]) as bench:
        tables, tc, settings, work = bench.tables, bench.tunnels, bench.settings, bench.work
        print(f"loading {args.rows} rows ...", flush=True)
        load_s = load(tables, args.rows)
        print(f"loaded in {load_s:.1f}s", flush=True)

        results: dict[str, tuple[float, int]] = {}
        t = run_worker(tc, new_tunnel(tc, "w-count"), args.rows, None)
        results["worker_count"] = (t, args.rows)
        print(f"TunnelWorker, counting: {t:.2f}s ({args.rows / t:,.0f} rec/s)", flush=True)
        pq_worker = ParquetSink(str(work / "pq-worker"))
        t = run_worker(tc, new_tunnel(tc, "w-parquet"), args.rows, pq_worker)
        assert read_change_log(pq_worker.path).num_rows == args.rows
        results["worker_parquet"] = (t, args.rows)
        print(f"TunnelWorker, parquet: {t:.2f}s ({args.rows / t:,.0f} rec/s)", flush=True)

        spark = bench.spark()
        warm = run_spark(spark, settings, _tunnel(tc, "s-warm"), DiscardSink(),
                         args.records_per_channel)  # starts the Python workers
        summaries: dict[str, JobSummary] = {}
        summaries["spark_discard"] = run_spark(spark, settings, _tunnel(tc, "s-discard"), DiscardSink(),
                                               args.records_per_channel)
        pq_spark = ParquetSink(str(work / "pq-spark"))
        summaries["spark_parquet"] = run_spark(spark, settings, _tunnel(tc, "s-parquet"), pq_spark,
                                               args.records_per_channel)
        assert read_change_log(pq_spark.path).num_rows == args.rows
        for name, s in summaries.items():
            if s.records != args.rows:
                raise RuntimeError(f"{name} delivered {s.records} records, expected {args.rows}")
            results[name] = (s.seconds, s.records)
            print(f"{name}: {s.seconds:.2f}s ({s.records_per_second:,.0f} rec/s) profile {s.profile}", flush=True)
        shares = read_profile(tc, new_tunnel(tc, "profile"))
        report = render(args, load_s, bench.startup_s, warm, results, summaries, shares)
        print(report)
        if not args.no_write:
            RESULTS.write_text(report)
            print(f"wrote {RESULTS}")
        return 0


def _tunnel(tc: TunnelClient, name: str) -> str:
    new_tunnel(tc, name)
    return name


def render(args: argparse.Namespace, load_s: float, startup: float, warm: JobSummary,
           results: dict[str, tuple[float, int]], summaries: dict[str, JobSummary], shares: dict[str, float]) -> str:
    base = results["worker_count"][0]
    labels = {
        "worker_count": "**TunnelWorker, counting processor (baseline)**",
        "worker_parquet": "TunnelWorker, Parquet change-log processor",
        "spark_discard": "Spark consumer local[2], discarding sink",
        "spark_parquet": "Spark consumer local[2], Parquet change-log sink",
    }
    lines = [
        "# Spark consumer benchmark",
        "",
        "Command (from the repository root):",
        "",
        "```",
        f".venv/bin/python -m benchmarks.bench_spark --rows {args.rows} --channel-rows {args.channel_rows}",
        "```",
        "",
        f"Setup: one emulator process (`--base-channel-rows {args.channel_rows}`, default `--max-read-records`), "
        f"a table of {args.rows:,} rows (int key + 4 small columns) loaded in {load_s:.0f} s, read through a "
        f"fresh BaseData tunnel per measurement ({args.rows // args.channel_rows} channels). The Spark runs use "
        f"`ConsumerJob` (the code `spark-submit` runs) on a `local[2]` session started beforehand "
        f"({startup:.1f} s) and warmed by one run ({warm.seconds:.1f} s, Python workers started); "
        f"`--records-per-channel {args.records_per_channel}`. 2 vCPU shared by the emulator, Spark and the "
        "consumer (and other engineers' jobs), so numbers are noisy: compare ratios.",
        "",
        "| measurement | seconds | records/s | vs baseline |",
        "|---|---:|---:|---:|",
    ]
    for key, label in labels.items():
        seconds, records = results[key]
        lines.append(f"| {label} | {seconds:.2f} | {records / seconds:,.0f} | {base / seconds:.2f}x |")
    lines += ["", "## Where the time goes (Spark runs)", "",
              "| | discarding sink | Parquet sink |", "|---|---:|---:|"]
    d, p = summaries["spark_discard"], summaries["spark_parquet"]
    rows = [
        ("wall time of the phase", d.seconds, p.seconds),
        ("driver: DescribeTunnel, heartbeats, GetCheckpoint (plan)", d.profile["plan"], p.profile["plan"]),
        ("driver: Checkpoint + TERMINATED heartbeat", d.profile["checkpoint"], p.profile["checkpoint"]),
        ("Spark jobs (wall)", d.profile["spark_round"], p.profile["spark_round"]),
        ("tasks: ReadRecords (Σ over tasks)", d.profile["read"], p.profile["read"]),
        ("tasks: sink = Arrow conversion + Parquet write (Σ)", d.profile["sink"], p.profile["sink"]),
    ]
    for label, a, b in rows:
        lines.append(f"| {label} | {a:.2f} s | {b:.2f} s |")
    over_d = max(0.0, 2 * d.profile["spark_round"] - d.profile["read"] - d.profile["sink"])
    over_p = max(0.0, 2 * p.profile["spark_round"] - p.profile["read"] - p.profile["sink"])
    lines.append(f"| Spark scheduling + Python worker/Arrow overhead (2 cores × job wall − Σ task work) | "
                 f"{over_d:.2f} core-s | {over_p:.2f} core-s |")
    lines += ["", "Inside ReadRecords (cProfile of one channel drained sequentially, share of client time), applied "
              "to the Parquet run's Σ ReadRecords task time:", ""]
    lines += [f"- {name}: {share * 100:.0f} % ≈ {share * p.profile['read']:.1f} task-s"
              for name, share in shares.items()]
    worker_pq = results["worker_parquet"][0]
    lines += [
        "",
        "Reading: the Spark consumer reaches "
        f"{base / d.seconds:.2f}x of the in-process TunnelWorker's rate without a sink and "
        f"{worker_pq / p.seconds:.2f}x of the TunnelWorker writing the same Parquet change log. Both are bound "
        "by ReadRecords (the emulator answering and PlainBuffer decoding share the 2 cores with everything "
        "else); local[2] reads 2 channels at a time while the worker overlaps 10 channels' reads in threads. "
        "Spark's own cost is small once the session is up (scheduling, Python workers and Arrow transfer "
        "≈ the last profile row); the fixed costs are the JVM/session start and the first Python worker "
        "start, paid once per `spark-submit` (see the setup line). The driver's tunnel work (plan, "
        "checkpoints, heartbeats) is under a second for the whole phase.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
