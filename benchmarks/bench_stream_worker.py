"""StreamWorker vs TunnelWorker on the same stream data, same run, against a bare GetStreamRecord loop.

Run: ``.venv/bin/python -m benchmarks.bench_stream_worker [--rows 200000] [--rounds 3]``

One emulator process (``--stream-partitions 4``); a stream-enabled table receives ``rows`` row writes (an int
key and four small columns, through BatchWriteRow), so the stream log holds ``rows`` records in 4 shards.
Each round (variants interleaved, best of ``--rounds`` kept) drains all of them with:

1. a bare loop: GetShardIterator + GetStreamRecord (limit 1000) + decode, one thread per shard (the baseline);
2. one StreamWorker (fresh status table) with a no-op processor that checkpoints after every batch, timed from
   ``start()`` (status table creation, DescribeStream, lease creation and takeover included) to the last record;
3. one TunnelWorker on a fresh Stream tunnel created with ``earliest=True`` (same records), no-op processor,
   timed from ``start()`` to the last record.

Every drain is checked to deliver exactly ``rows`` records. Writes ``benchmarks/results/stream_worker.md``
(``--no-write`` to only print).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import Record, StreamSpec, TunnelType
from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.client.stream.config import StreamWorkerConfig
from airflow_tablestore.client.stream.processor import Checkpointer, RecordProcessor, ShutdownReason
from airflow_tablestore.client.stream.worker import StreamWorker
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.worker import TunnelWorker
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import CountingChannelProcessor, RecordCounter, load_user_rows, timed_count

TABLE = "bench_stream"
SHARDS = 4
RESULTS_FILE = Path(__file__).resolve().parent / "results" / "stream_worker.md"


class NoOpShardProcessor(RecordProcessor):
    def __init__(self, counter: RecordCounter) -> None:
        self.counter = counter

    def process_records(self, records: list[Record], checkpointer: Checkpointer) -> None:
        self.counter.add(len(records))
        checkpointer.checkpoint()

    def shutdown(self, reason: ShutdownReason, checkpointer: Checkpointer) -> None:
        if reason is not ShutdownReason.LEASE_LOST:
            checkpointer.checkpoint()


def bare_parallel(streams: StreamClient, rows: int) -> int:
    sid = streams.stream_id_of(TABLE)
    assert sid is not None
    shards = [s.shard_id for s in streams.describe_stream(sid).shards]

    def drain(shard: str) -> int:
        it: str | None = streams.get_shard_iterator(sid, shard)
        n = 0
        while it is not None:
            result = streams.get_stream_records(it, limit=1000)
            n += len(result.records)
            if not result.records:
                break
            it = result.next_iterator
        return n

    with ThreadPoolExecutor(len(shards)) as pool:
        return sum(pool.map(drain, shards))


def stream_worker(tables: TableClient, rows: int, status: str) -> int:
    counter = RecordCounter(rows)
    config = StreamWorkerConfig(status_table=status, worker_id="bench", lease_duration_s=30, renew_interval_s=5,
                                idle_poll_s=0.2, max_parallel_shards=SHARDS, progress_log_interval_s=3600)
    worker = StreamWorker(tables, TABLE, lambda shard: NoOpShardProcessor(counter), config)
    _STOP.append(worker.shutdown)
    worker.start()
    if not counter.done.wait(600):
        raise RuntimeError(f"StreamWorker delivered only {counter.count} of {rows} records")
    return counter.count


def tunnel_worker(tunnels: TunnelClient, rows: int, name: str) -> int:
    counter = RecordCounter(rows)
    tunnel_id = tunnels.create_tunnel(TABLE, name, TunnelType.STREAM, earliest=True)
    config = TunnelWorkerConfig(heartbeat_interval_s=5, checkpoint_interval_s=10, client_tag="bench",
                                progress_log_interval_s=3600)
    worker = TunnelWorker(tunnels, tunnel_id, CountingChannelProcessor(counter), config)
    _STOP.append(worker.shutdown)
    worker.start()
    if not counter.done.wait(600):
        raise RuntimeError(f"TunnelWorker delivered only {counter.count} of {rows} records")
    return counter.count


_STOP: list[Callable[[], None]] = []


def stop_all() -> None:
    for stop in _STOP:
        stop()
    _STOP.clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS_FILE.name}")
    args = ap.parse_args()
    rows = args.rows
    extra = ["--stream-partitions", str(SHARDS), "--log-level", "WARNING"]
    with EmulatorProcess(extra_args=extra) as emu:
        tables = TableClient(**emu.client_kwargs)
        streams = StreamClient(transport=tables.transport)
        tunnels = TunnelClient(**emu.client_kwargs)
        t0 = time.perf_counter()
        load_user_rows(tables, TABLE, rows, stream=StreamSpec(True, 24))
        print(f"loaded {rows} rows (stream records) in {time.perf_counter() - t0:.1f}s")
        variants: dict[str, Callable[[int], Callable[[], int]]] = {
            "bare GetStreamRecord+decode, one thread per shard": lambda r: lambda: bare_parallel(streams, rows),
            "StreamWorker, no-op processor, checkpoint every batch":
                lambda r: lambda: stream_worker(tables, rows, f"bench_status_{r}"),
            "TunnelWorker (Stream tunnel, earliest), no-op processor":
                lambda r: lambda: tunnel_worker(tunnels, rows, f"bench_tunnel_{r}"),
        }
        results: dict[str, list[float]] = {label: [] for label in variants}
        for r in range(args.rounds):
            for label, make in variants.items():
                seconds = timed_count(label, make(r), rows)
                stop_all()
                results[label].append(seconds)
                print(f"round {r}: {label}: {seconds:.2f}s, {rows / seconds:,.0f} records/s", flush=True)
    report(results, rows, args)


def report(results: dict[str, list[float]], rows: int, args: Any) -> None:
    labels = list(results)
    best = {label: min(v) for label, v in results.items()}
    base = best[labels[0]]
    sw, tw = best[labels[1]], best[labels[2]]
    load_avg = os.getloadavg()[0]
    lines = [
        "# StreamWorker",
        "",
        f"Command: `.venv/bin/python -m benchmarks.bench_stream_worker --rows {rows} --rounds {args.rounds}` "
        "(writes this file; `--no-write` only prints).",
        "",
        f"One emulator process (`--stream-partitions {SHARDS}`), a stream-enabled table that received {rows:,} "
        f"row writes (int key + 4 small columns), so {rows:,} stream records in {SHARDS} shards; one client "
        f"process, 2 vCPUs shared with the emulator (load average {load_avg:.1f} at the end of this run). "
        f"Variants interleaved over {args.rounds} rounds, best kept; every drain delivers exactly {rows:,} "
        "records. Both workers are timed from `start()` to their last record (StreamWorker: status table, "
        "DescribeStream, lease creation/takeover included; TunnelWorker: connect and first heartbeat included); "
        "shutdown is not timed.",
        "",
        "| measurement | best seconds | best records/s | vs bare loop | median records/s |",
        "|---|---:|---:|---:|---:|",
    ]
    median = {label: statistics.median(v) for label, v in results.items()}
    for label in labels:
        lines.append(f"| {label} | {best[label]:.2f} | {rows / best[label]:,.0f} | {base / best[label]:.2f}x "
                     f"| {rows / median[label]:,.0f} |")
    lines += [
        "",
        "Per round (records/s): " + "; ".join(
            f"{short}: " + " / ".join(f"{rows / s:,.0f}" for s in results[label])
            for short, label in zip(("bare loop", "StreamWorker", "TunnelWorker"), labels, strict=True)),
        "",
        f"- **StreamWorker vs TunnelWorker** on the same data: **{tw / sw:.2f}x** the TunnelWorker's records/s "
        f"(best of rounds; {median[labels[2]] / median[labels[1]]:.2f}x by medians).",
        f"- **StreamWorker framework overhead** vs the bare per-shard loop: **{(sw / base - 1) * 100:+.1f} %** "
        "(checkpointing every batch: one conditional UpdateRow per 1,000 records).",
        "",
        "Why the two workers differ: the StreamWorker reads the emulator's Stream API (GetStreamRecord, up to 1,000 "
        "records per call, one conditional UpdateRow per checkpoint) with one pool thread per shard; the "
        "TunnelWorker reads the same log through the tunnel service (ReadRecords with its own per-call record "
        "budget, read-ahead, periodic checkpoints). Both decode the same PlainBuffer records with the same codec.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        RESULTS_FILE.write_text(text)
        print(f"wrote {RESULTS_FILE}")


if __name__ == "__main__":
    main()
