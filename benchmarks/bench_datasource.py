"""The ``tablestore`` Spark data source against the consumer's full phase: the same table, one run, local[2].

Run: ``.venv/bin/python -m benchmarks.bench_datasource [--rows 500000] [--rounds 2]``

One emulator process, a table of ``rows`` rows (int key + four small columns). Each round measures, on one
``local[2]`` session started (and warmed) beforehand:

1. **baseline** — the consumer's full phase (``ConsumerJob``, a fresh BaseData tunnel, discarding sink);
2. ``spark.read.format("tablestore")`` of the whole table into Spark's ``noop`` sink (every row materialised);
3. ``df.write.format("tablestore")`` of that DataFrame into a new table (put, batches of 200).

Every measurement must deliver exactly ``rows`` rows. Ratios are against the baseline of the same round.
Results go to ``benchmarks/results/datasource.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_tablestore.client.table.client import TableClient
from benchmarks.bench_spark import TABLE, DiscardSink, _tunnel, run_spark
from benchmarks.common import load_user_rows, spark_bench

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "datasource.md"


def read_table(spark: Any, options: dict[str, str], rows: int) -> float:
    """Seconds to read the whole table through the data source (Spark's noop sink materialises every row)."""
    started = time.monotonic()
    spark.read.format("tablestore").options(**options).load().write.format("noop").mode("overwrite").save()
    seconds = time.monotonic() - started
    counted = spark.read.format("tablestore").options(**options).load().count()
    if counted != rows:
        raise RuntimeError(f"spark.read delivered {counted} rows, expected {rows}")
    return seconds


def write_table(spark: Any, tables: TableClient, options: dict[str, str], target: str, rows: int) -> float:
    """Seconds to write the whole table back into ``target`` through the data source."""
    load_user_rows(tables, target, 0)  # the same schema, empty
    frame = spark.read.format("tablestore").options(**options).load().cache()
    if frame.count() != rows:
        raise RuntimeError("the cached source frame is incomplete")
    started = time.monotonic()
    frame.write.format("tablestore").options(**{**options, "table": target}).mode("append").save()
    seconds = time.monotonic() - started
    frame.unpersist()
    written = spark.read.format("tablestore").options(**{**options, "table": target}).load().count()
    if written != rows:
        raise RuntimeError(f"df.write wrote {written} rows, expected {rows}")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--channel-rows", type=int, default=50_000)
    parser.add_argument("--split-size-mb", type=int, default=4)
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/datasource.md")
    args = parser.parse_args(argv)
    with spark_bench("datasource", ["--base-channel-rows", str(args.channel_rows)]) as bench:
        tables, tunnels, settings = bench.tables, bench.tunnels, bench.settings
        options = {"table": TABLE, **bench.connection, "split_size_mb": str(args.split_size_mb)}
        print(f"loading {args.rows} rows ...", flush=True)
        load_user_rows(tables, TABLE, args.rows)
        partitions = len(tables.compute_split_points_by_size(TABLE, args.split_size_mb << 20).ranges())

        spark = bench.spark()
        run_spark(spark, settings, _tunnel(tunnels, "warm"), DiscardSink(), 50_000)  # Python workers up
        read_table(spark, options, args.rows)

        rounds: list[tuple[float, float, float]] = []
        for round_no in range(1, args.rounds + 1):
            summary = run_spark(spark, settings, _tunnel(tunnels, f"full-{round_no}"), DiscardSink(), 50_000)
            if summary.records != args.rows:
                raise RuntimeError(f"the full phase delivered {summary.records} records, expected {args.rows}")
            read_s = read_table(spark, options, args.rows)
            write_s = write_table(spark, tables, options, f"bench_write_{round_no}", args.rows)
            rounds.append((summary.seconds, read_s, write_s))
            print(f"round {round_no}: full phase {summary.seconds:.2f}s, spark.read {read_s:.2f}s "
                  f"({summary.seconds / read_s:.2f}x the full phase), df.write {write_s:.2f}s "
                  f"({args.rows / write_s:,.0f} rows/s)", flush=True)
        report = render(args, partitions, rounds)
        print(report)
        if not args.no_write:
            RESULTS.write_text(report)
            print(f"wrote {RESULTS}")
        return 0


def render(args: argparse.Namespace, partitions: int, rounds: list[tuple[float, float, float]]) -> str:
    lines = [
        "# Spark data source benchmark",
        "",
        "Command (from the repository root):",
        "",
        "```",
        f".venv/bin/python -m benchmarks.bench_datasource --rows {args.rows} --rounds {args.rounds}",
        "```",
        "",
        f"One emulator, a table of {args.rows:,} rows (int key + 4 small columns), `local[2]`; the data source "
        f"read it in {partitions} partitions (`split_size_mb={args.split_size_mb}`), the consumer's full phase "
        f"in {args.rows // args.channel_rows} channels. 2 vCPU shared by the emulator and Spark: compare ratios.",
        "",
        "| round | full phase (baseline) s | spark.read s | spark.read vs full phase | df.write s | df.write rows/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for i, (full_s, read_s, write_s) in enumerate(rounds, 1):
        lines.append(f"| {i} | {full_s:.2f} | {read_s:.2f} | {full_s / read_s:.2f}x | {write_s:.2f} | "
                     f"{args.rows / write_s:,.0f} |")
    ratio = statistics.median(full_s / read_s for full_s, read_s, _ in rounds)
    lines += ["", f"Median: `spark.read` runs at {ratio:.2f}x the full phase's speed (goal: at least 1.0x).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
