"""What the write fence costs: the Tablestore sink with and without ``--fence-column``, same run, same data.

Run: ``.venv/bin/python -m benchmarks.bench_fence [--rows 40000] [--changes 20000] [--rounds 2]``

One emulator process; a source table of ``rows`` rows with a BaseAndStream tunnel per measurement and a fresh
replica each time. Each measurement runs the consumer's full phase and then an incremental phase over
``changes`` changes (puts, updates, deletes) with the rounds executed in-process (``run_round_locally``: the
sink's own cost, without Spark's), alternating fenced and unfenced runs ``rounds`` times. The replica must
equal the source after every run. Baseline: the unfenced sink (plain puts, updates and deletes). Results go to
``benchmarks/results/spark-fencing.md`` together with the Spark before/after comparison
(``benchmarks/compare_spark_revisions.sh``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import MAX_TIME_DEVIATION
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.verify.compare import verify_replica
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer.driver import ConsumerJob
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.consumer.reader import RoundPlan, run_round_locally
from airflow_tablestore.spark.consumer.round_result import ChannelResult
from airflow_tablestore.spark.sinks.tablestore import TablestoreSink
from demo import replication as demo

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "spark-fencing-sink.md"


def _local(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
    return run_round_locally(plan)


def measure(emu: EmulatorProcess, tables: TableClient, tunnels: TunnelClient, settings: ConnectionSettings,
            label: str, fence: str, rows: int, changes: int) -> tuple[float, float]:
    src, dst = f"src_{label}", f"dst_{label}"
    demo.create_source_table(tables, src)
    demo.load_rows(tables, src, rows)
    tunnels.create_tunnel(src, "t")
    desc = tables.describe_table(src)
    options = dataclasses.replace(desc.schema.options, max_time_deviation=MAX_TIME_DEVIATION)
    tables.create_table(dataclasses.replace(desc.schema, name=dst, stream=None, options=options))
    sink = TablestoreSink(settings, dst, fence_column=fence)
    base = ["--table", src, "--tunnel", "t", "--sink", "tablestore", "--sink-table", dst, "--fence-column", fence,
            "--records-per-channel", "100000", "--heartbeat-interval", "2", "--idle-wait", "0.2"]
    started = time.perf_counter()
    ConsumerJob(parse_args([*base, "--phase", "full"]), settings, sink, lambda: None, runner=_local).run()
    full = time.perf_counter() - started
    demo.write_changes(tables, src, rows, changes)
    cutoff = datetime.fromtimestamp(int(emu.control.state()["now_us"]) / 1e6 + 0.001, tz=UTC).isoformat()
    started = time.perf_counter()
    ConsumerJob(parse_args([*base, "--phase", "incremental", "--cutoff", cutoff]), settings, sink, lambda: None,
                runner=_local).run()
    incremental = time.perf_counter() - started
    report = verify_replica(tables, src, tables, dst, all_versions=True)
    if not report.ok:
        raise RuntimeError(f"{label}: {report}")
    return rows / full, changes / incremental


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {"unfenced": [], "fenced": []}
    with EmulatorProcess(extra_args=["--log-level", "WARNING", "--base-channel-rows", "10000"]) as emu:
        tables = TableClient(**emu.client_kwargs)
        tunnels = TunnelClient(**emu.client_kwargs)
        settings = ConnectionSettings(emu.endpoint, emu.instance, emu.access_key_id, emu.access_key_secret)
        for round_no in range(args.rounds):
            for name, fence in (("unfenced", ""), ("fenced", "_tunnel_seq")):
                rates = measure(emu, tables, tunnels, settings, f"{name}{round_no}", fence, args.rows, args.changes)
                results[name].append(rates)
                print(f"round {round_no + 1} {name}: full {rates[0]:,.0f} rows/s, incremental {rates[1]:,.0f} "
                      "changes/s", flush=True)
    full = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
    inc = {k: statistics.median(r[1] for r in v) for k, v in results.items()}
    report = "\n".join([
        "## Tablestore sink: the cost of the write fence",
        "",
        f"Reproduce: `.venv/bin/python -m benchmarks.bench_fence --rows {args.rows} --changes {args.changes} "
        f"--rounds {args.rounds}` (one emulator; rounds run in-process, so this is the sink's cost without "
        "Spark's; fenced and unfenced runs alternate; medians; the replica is checked after every run).",
        "",
        "| sink | full phase rows/s | incremental changes/s |",
        "|---|---:|---:|",
        f"| unfenced (baseline) | {full['unfenced']:,.0f} | {inc['unfenced']:,.0f} |",
        f"| fenced (`_tunnel_seq`, conditional writes, tombstones) | {full['fenced']:,.0f} "
        f"({full['fenced'] / full['unfenced']:.2f}x) | {inc['fenced']:,.0f} ({inc['fenced'] / inc['unfenced']:.2f}x) |",
        "",
        "Reading: every fenced write carries a column condition the server evaluates against the row's current "
        "fence, and deletes become tombstone puts; on the real service a conditional write also reads the row (one "
        "extra read capacity unit per row). Without the fence a late or replayed write can roll rows back "
        "(`tests/spark/consumer/test_fencing.py` shows it on its unfenced control runs), so it is on by default; "
        "`--fence-column ''` turns it off for pipelines that can accept that.",
        "",
    ])
    print(report)
    if not args.no_write:
        RESULTS.write_text(report)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
