"""The streaming source's planner against the channel count: its cost per micro-batch, and per channel.

Run: ``.venv/bin/python -m benchmarks.bench_stream_planner [--channels 4 64 256] [--rows-per-channel 40]``

At each point one emulator process serves a table of ``channels`` × ``rows-per-channel`` rows with its stream on
(``channels`` stream partitions and BaseData channels), a BaseAndStream tunnel and ``rows / 4`` updates. The
source's driver side (:class:`~airflow_tablestore.spark.stream.planner.StreamPlanner`, through
:class:`~airflow_tablestore.spark.stream.reader.TablestoreStreamReader`) is driven in-process with the calls Spark
makes per micro-batch: ``latestOffset``, ``partitions``, then (after the read tasks ran) ``commit``. The read tasks
run in-process between them (``read_span_partition``) and are not counted. For each batch: the planner's CPU (its
thread's CPU time over the three calls: the driver Python's share of a micro-batch, Spark's own excluded) and
the requests it sent by API (the emulator's counts around the calls). Batches: an ``availableNow`` query that
drains the base data and the changes (``max_records_per_trigger`` = 2 × the table's rows / 5, so several batches),
then three ``processingTime`` batches over the caught-up tunnel, after one that connects (nothing new: every
channel is planned again after its idle wait and read empty). Per channel = per batch / channels.

Writes ``benchmarks/results/stream-planner.md`` (``--no-write`` to only print).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from airflow_tablestore.client.model import Column, RowWrite, StreamSpec, TunnelType, WriteType
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.stream.output import change_log_schema
from airflow_tablestore.spark.stream.planner import IDLE_WAIT_S
from airflow_tablestore.spark.stream.reader import SpanPartition, TablestoreStreamReader, read_span_partition
from benchmarks.common import load_user_rows

TABLE = "bench_planner"
TUNNEL = "planner"
RESULTS_FILE = Path(__file__).resolve().parent / "results" / "stream-planner.md"
CHANNELS = (4, 64, 256)
T = TypeVar("T")


@dataclass
class Batch:
    """One micro-batch: what the planner did for it."""

    channels: int
    kind: str
    spans: int
    records: int
    cpu_s: float
    requests: Counter[str] = field(default_factory=Counter)


class Meter:
    """The planner's thread CPU and the emulator's request counts over the planner's calls only."""

    def __init__(self, emu: EmulatorProcess) -> None:
        self.emu = emu
        self.cpu_s = 0.0
        self.requests: Counter[str] = Counter()

    def call(self, fn: Callable[[], T]) -> T:
        self.emu.control.request_counts(reset=True)
        started = time.thread_time()
        try:
            return fn()
        finally:
            self.cpu_s += time.thread_time() - started
            self.requests.update(self.emu.control.request_counts(reset=True))


def read_all(partitions: Sequence[Any]) -> int:
    """What Spark's read tasks do (not measured): read each span, store where it ended."""
    count = 0
    for partition in partitions:
        assert isinstance(partition, SpanPartition)
        count += sum(batch.num_rows for batch in read_span_partition(partition))
    return count


def batch(emu: EmulatorProcess, reader: TablestoreStreamReader, start: dict[str, Any], channels: int, kind: str,
          max_rows: int | None) -> tuple[Batch | None, dict[str, Any]]:
    """One micro-batch as Spark runs it; None when the end offset is the start (no batch)."""
    meter = Meter(emu)
    end = meter.call(lambda: reader.planner.latest_offset(start, max_rows))
    if end == start:
        return None, end
    partitions = meter.call(lambda: reader.partitions(start, end))
    records = read_all(partitions)
    meter.call(lambda: reader.commit(end))
    return Batch(channels, kind, len(partitions), records, meter.cpu_s, meter.requests), end


def measure_point(channels: int, rows_per_channel: int) -> list[Batch]:
    rows = channels * rows_per_channel
    args = ["--stream-partitions", str(channels), "--base-channel-rows", str(rows_per_channel),
            "--log-level", "WARNING"]
    batches: list[Batch] = []
    with EmulatorProcess(extra_args=args) as emu, TableClient(**emu.client_kwargs) as tables, \
            TunnelClient(**emu.client_kwargs) as tunnels:
        load_user_rows(tables, TABLE, rows, stream=StreamSpec(enabled=True, expiration_hours=24))
        tunnels.create_tunnel(TABLE, TUNNEL, TunnelType.BASE_AND_STREAM)
        tables.write_rows(RowWrite(TABLE, WriteType.UPDATE, (("id", i),), (Column("score", -i),))
                          for i in range(0, rows, 4))
        time.sleep(0.5)
        settings = ConnectionSettings(emu.endpoint, emu.instance, emu.access_key_id, emu.access_key_secret)
        options = dataclasses.replace(SourceOptions(settings=settings, table=TABLE), tunnel=TUNNEL,
                                      heartbeat_interval=1.0)
        limit = max(1, 2 * rows // 5)
        reader = TablestoreStreamReader(options, change_log_schema())
        try:
            reader.planner.prepare_available_now()
            start = reader.initialOffset()
            while True:
                done, start = batch(emu, reader, start, channels, "availableNow", limit)
                if done is None:
                    break
                batches.append(done)
        finally:
            reader.stop()
        reader = TablestoreStreamReader(options, change_log_schema())  # a processingTime query from there
        try:
            for number in range(4):  # the first one also connects: not counted
                time.sleep(IDLE_WAIT_S + 0.1)
                done, start = batch(emu, reader, start, channels, "processingTime, idle", None)
                if done is not None and number:
                    batches.append(done)
        finally:
            reader.stop()
    read = sum(b.records for b in batches if b.kind == "availableNow")
    if read != rows + len(range(0, rows, 4)):
        raise RuntimeError(f"{channels} channels: read {read} records, expected {rows + len(range(0, rows, 4))}")
    return batches


def report(batches: list[Batch], command: str) -> str:
    lines = [
        "# Spark streaming source: the planner against channels",
        "",
        f"Command: `{command}`",
        "",
        (__doc__ or "").split("\n\n", 2)[2].split("\n\nWrites")[0].replace("\n", " "),
        "",
        "Medians over the batches of each kind (the `availableNow` batches that read records; the idle "
        "`processingTime` batches).",
        "",
        "| channels | batches | spans / batch | planner CPU ms / batch | µs / channel | requests / batch "
        "| requests / channel | requests by API (per batch) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    summary: dict[tuple[int, str], float] = {}
    for (channels, kind) in dict.fromkeys((b.channels, b.kind) for b in batches):
        mine = [b for b in batches if b.channels == channels and b.kind == kind]
        cpu = statistics.median(b.cpu_s for b in mine)
        requests = statistics.median(sum(b.requests.values()) for b in mine)
        apis: Counter[str] = Counter()
        for b in mine:
            apis.update(b.requests)
        by_api = ", ".join(f"{path.strip('/')} {count / len(mine):.0f}" for path, count in apis.most_common())
        summary[(channels, kind)] = cpu / channels
        lines.append(f"| {channels} | {len(mine)} {kind} | {statistics.median(b.spans for b in mine):.0f} "
                     f"| {1000 * cpu:.1f} | {1e6 * cpu / channels:.0f} | {requests:.0f} "
                     f"| {requests / channels:.2f} | {by_api} |")
    lines.append("")
    for kind in dict.fromkeys(b.kind for b in batches):
        points = sorted((c, v) for (c, k), v in summary.items() if k == kind)
        if len(points) >= 2:
            (few, low), (many, high) = points[0], points[-1]
            lines.append(f"- {kind}: planner CPU per channel per batch {1e6 * low:.0f} µs at {few} channels, "
                         f"{1e6 * high:.0f} µs at {many} ({high / low:.2f}x per channel for {many // few}x the "
                         "channels).")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--channels", type=int, nargs="+", default=list(CHANNELS))
    ap.add_argument("--rows-per-channel", type=int, default=40)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    batches: list[Batch] = []
    for channels in args.channels:
        print(f"== {channels} channels", flush=True)
        mine = measure_point(channels, args.rows_per_channel)
        for b in mine:
            print(f"  {b.kind}: {b.spans} spans, {b.records} records, planner {1000 * b.cpu_s:.1f} ms CPU, "
                  f"{sum(b.requests.values())} requests", flush=True)
        batches += mine
    text = report(batches, "python -m benchmarks.bench_stream_planner " + " ".join(sys.argv[1:]))
    print(text)
    if not args.no_write:
        RESULTS_FILE.write_text(text)


if __name__ == "__main__":
    main()
