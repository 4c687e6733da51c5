"""TunnelWorker framework overhead vs a bare ReadRecords + decode loop (baseline, same run), plus emulator
ReadRecords throughput and a cProfile summary of the client side.

Run: ``.venv/bin/python -m benchmarks.bench_tunnel_worker [--rows 200000] [--channel-rows 20000]``

One emulator process; a table of ``rows`` rows (an int key and four small columns) read through BaseData
tunnels (one fresh tunnel per measurement, ``rows / channel_rows`` channels). Timed:

1. bare loop, sequential over channels: GetCheckpoint + ReadRecords/decode until "finished" (no checkpoints);
2. bare loop with the same parallelism as the worker (one thread per channel);
3. TunnelWorker with a no-op processor (one consumer per channel, read-ahead, checkpoints, heartbeats), from
   start() to the last record processed (connect and first heartbeat included, shutdown not);
4. the sequential bare loop again under cProfile, summarised as emulator wait (socket) vs HTTP/transport vs
   protobuf parse vs PlainBuffer decode.

Every drain is checked to deliver exactly ``rows`` records. Ratios are against the parallel bare loop. The run
writes ``benchmarks/results/tunnel_worker.md`` (``--no-write`` to only print).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import ChannelStatus, TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import FINISHED, TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.worker import TunnelWorker
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import CountingChannelProcessor, RecordCounter, load_user_rows

TABLE = "bench_worker"
RESULTS_FILE = Path(__file__).resolve().parent / "results" / "tunnel_worker.md"


def bare_channels(tc: TunnelClient, tunnel_id: str) -> tuple[str, list[str]]:
    client_id = tc.connect(tunnel_id, timeout_s=600, client_tag="bench")
    channels = tc.heartbeat(tunnel_id, client_id, [])
    return client_id, [c.channel_id for c in channels if c.status is ChannelStatus.OPEN]


def drain_channel(tc: TunnelClient, tunnel_id: str, client_id: str, channel_id: str) -> tuple[int, int]:
    token, _ = tc.get_checkpoint(tunnel_id, client_id, channel_id)
    records = size = 0
    while token != FINISHED:
        result = tc.read_records(tunnel_id, client_id, channel_id, token)
        records += len(result.records.decode())  # decoded, as the worker does
        size += result.size_bytes
        token = result.next_token
    return records, size


def bare_sequential(tc: TunnelClient, tunnel_id: str) -> tuple[int, int]:
    client_id, channels = bare_channels(tc, tunnel_id)
    totals = [drain_channel(tc, tunnel_id, client_id, cid) for cid in channels]
    tc.shutdown(tunnel_id, client_id)
    return sum(t[0] for t in totals), sum(t[1] for t in totals)


def bare_parallel(tc: TunnelClient, tunnel_id: str) -> tuple[int, int]:
    client_id, channels = bare_channels(tc, tunnel_id)
    with ThreadPoolExecutor(max_workers=len(channels)) as pool:
        totals = list(pool.map(lambda cid: drain_channel(tc, tunnel_id, client_id, cid), channels))
    tc.shutdown(tunnel_id, client_id)
    return sum(t[0] for t in totals), sum(t[1] for t in totals)


def run_worker(tc: TunnelClient, tunnel_id: str, rows: int, read_ahead: int) -> tuple[int, int]:
    counter = RecordCounter(rows)
    config = TunnelWorkerConfig(heartbeat_interval_s=5, checkpoint_interval_s=10, client_tag="bench",
                                progress_log_interval_s=3600, read_ahead=read_ahead)
    worker = TunnelWorker(tc, tunnel_id, CountingChannelProcessor(counter), config)
    _STARTED.append(worker)
    worker.start()
    if not counter.done.wait(600):
        raise RuntimeError(f"worker delivered only {counter.count} of {rows} records")
    metrics = worker.metrics
    return counter.count, metrics.bytes_read


def stop_workers() -> None:
    """Shut down (outside the timed section) every worker started by :func:`run_worker`."""
    for worker in _STARTED:
        worker.shutdown()
    _STARTED.clear()


_STARTED: list[TunnelWorker] = []


def timed(label: str, fn: Callable[[], tuple[int, int]], rows: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    n, size = fn()
    dt = time.perf_counter() - t0
    if n != rows:
        raise RuntimeError(f"{label}: {n} records, expected {rows}")
    return {"label": label, "seconds": dt, "rps": n / dt, "mbps": size / dt / 1e6}


_BUCKETS = (
    ("emulator wait (socket recv)", ("socket.py", "_socket", "ssl.py", "{method 'recv", "{method 'readinto")),
    ("PlainBuffer decode + Record build", ("plainbuffer", "records.py", "crc8.py")),
    ("protobuf parse/serialize", ("FromString", "ParseFromString", "SerializeToString", "ByteSize",
                                  "message.py", "protobuf")),
    ("HTTP client (requests/urllib3/http.client) + transport + signing",
     ("requests", "urllib3", "http/client", "transport.py", "auth.py", "hmac", "hashlib", "email")),
)


def profile_summary(tc: TunnelClient, tunnel_id: str) -> tuple[list[tuple[str, float]], list[str], float]:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.runcall(bare_sequential, tc, tunnel_id)
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    totals = {name: 0.0 for name, _ in _BUCKETS}
    totals["other"] = 0.0
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, _line, func), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        where = f"{filename} {func}"
        for name, needles in _BUCKETS:
            if any(n in where for n in needles):
                totals[name] += tottime
                break
        else:
            totals["other"] += tottime
    top = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:10]
    lines = [f"{v[2]:7.2f}s  {v[1]:>8} calls  {k[2]}  ({k[0].rsplit('/', 2)[-1]}:{k[1]})" for k, v in top]
    return sorted(totals.items(), key=lambda kv: -kv[1]), lines, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--channel-rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repetitions (best of) per variant")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS_FILE.name}")
    args = ap.parse_args()
    extra = ["--base-channel-rows", str(args.channel_rows), "--log-level", "WARNING"]
    with EmulatorProcess(extra_args=extra) as emu:
        tables = TableClient(**emu.client_kwargs)
        tc = TunnelClient(**emu.client_kwargs)
        t0 = time.perf_counter()
        load_user_rows(tables, TABLE, args.rows)
        print(f"loaded {args.rows} rows in {time.perf_counter() - t0:.1f}s")
        rounds = args.rounds
        plan = ["seq", "profile"] + [f"{kind}{r}" for r in range(rounds) for kind in ("par", "w1_", "w0_")]
        ids = {n: tc.create_tunnel(TABLE, n, TunnelType.BASE_DATA) for n in plan}
        channels = len(tc.describe_tunnel(TABLE, "seq").channels)
        labels = {
            "par": f"bare ReadRecords+decode, {channels} threads",
            "w1_": "TunnelWorker, no-op processor, read_ahead=1 (default)",
            "w0_": "TunnelWorker, no-op processor, read_ahead=0",
        }
        results = [timed("bare ReadRecords+decode, sequential", lambda: bare_sequential(tc, ids["seq"]), args.rows)]
        best: dict[str, dict[str, Any]] = {}
        per_round: dict[str, list[float]] = {"par": [], "w1_": [], "w0_": []}
        for r in range(rounds):  # interleaved rounds, best of each kind: less sensitive to machine noise
            for kind in ("par", "w1_", "w0_"):
                tid = ids[f"{kind}{r}"]
                if kind == "par":
                    res = timed(labels[kind], functools.partial(bare_parallel, tc, tid), args.rows)
                else:
                    ra = 1 if kind == "w1_" else 0
                    res = timed(labels[kind], functools.partial(run_worker, tc, tid, args.rows, ra), args.rows)
                    stop_workers()
                print(f"  round {r + 1}: {res['label']}: {res['rps']:.0f} records/s", flush=True)
                per_round[kind].append(res["rps"])
                if kind not in best or res["rps"] > best[kind]["rps"]:
                    best[kind] = res
        results += [best["par"], best["w1_"], best["w0_"]]
        stop_workers()
        buckets, top, wall = profile_summary(tc, ids["profile"])
        tables.close()
        tc.close()

    baseline = best["par"]["rps"]
    print(f"\nrows={args.rows} channels={channels} (emulator --base-channel-rows {args.channel_rows})")
    print(f"{'measurement':56} {'seconds':>8} {'records/s':>10} {'MB/s':>7} {'vs parallel bare':>17}")
    for res in results:
        print(f"{res['label']:56} {res['seconds']:8.2f} {res['rps']:10.0f} {res['mbps']:7.2f} "
              f"{res['rps'] / baseline:16.2f}x")
    for kind in ("w1_", "w0_"):
        overhead = 1 - best[kind]["rps"] / baseline
        print(f"framework overhead ({best[kind]['label']}) vs equal-parallelism bare loop: "
              f"{overhead * 100:+.1f}% (target < 10%)")
    print(f"\nclient-side profile of the sequential bare loop ({wall:.1f}s wall under cProfile, tottime):")
    for name, secs in buckets:
        print(f"  {name:66} {secs:7.2f}s")
    print("top functions by own time:")
    for line in top:
        print("  " + line)
    if not args.no_write:
        RESULTS_FILE.write_text(render_report(args, channels, results, best, per_round, buckets, top, wall))
        print(f"\nwrote {RESULTS_FILE}")


def render_report(args: argparse.Namespace, channels: int, results: list[dict[str, Any]],
                  best: dict[str, dict[str, Any]], per_round: dict[str, list[float]],
                  buckets: list[tuple[str, float]], top: list[str], wall: float) -> str:
    """The Markdown of ``benchmarks/results/tunnel_worker.md`` for this run."""
    baseline = best["par"]["rps"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cmd = (f"`.venv/bin/python -m benchmarks.bench_tunnel_worker --rows {args.rows} "
           f"--channel-rows {args.channel_rows} --rounds {args.rounds}`")
    out = [
        "# TunnelWorker", "",
        f"Command: {cmd} (writes this file; `--no-write` only prints).", "",
        f"One emulator process (`--base-channel-rows {args.channel_rows}`, 1,000 records per ReadRecords), a "
        f"table of {args.rows:,} rows (int key + 4 small columns) read through fresh BaseData tunnels "
        f"({channels} channels), one client process, 2 vCPUs shared with the emulator and whatever else ran "
        f"(load average {load:.1f} at the end of this run). The variants are interleaved over "
        f"{args.rounds} rounds and the best of each is kept; every measurement is checked to deliver exactly "
        f"{args.rows:,} records. The worker is timed from `start()` to its last record processed (connect, "
        "first heartbeat, GetCheckpoint of every channel and its checkpoints included; shutdown not).", "",
        "| measurement | seconds | records/s | MB/s | vs parallel bare loop |",
        "|---|---:|---:|---:|---:|",
    ]
    for res in results:
        out.append(f"| {res['label']} | {res['seconds']:.2f} | {res['rps']:,.0f} | {res['mbps']:.2f} | "
                   f"{res['rps'] / baseline:.2f}x |")
    out += ["", "Per round (records/s): " + "; ".join(
        f"{name}: " + " / ".join(f"{v:,.0f}" for v in per_round[kind])
        for kind, name in (("par", "bare parallel"), ("w1_", "worker read_ahead=1"),
                           ("w0_", "worker read_ahead=0"))) + ".", ""]
    for kind in ("w1_", "w0_"):
        overhead = 1 - best[kind]["rps"] / baseline
        out.append(f"- **Framework overhead**, {best[kind]['label']}: **{overhead * 100:+.1f} %** vs the bare "
                   "loop with equal parallelism (target < 10 %; negative = faster).")
    seq = results[0]
    out += [
        "",
        f"**Emulator ReadRecords throughput** (single client, sequential): {seq['rps']:,.0f} records/s, "
        f"{seq['mbps']:.1f} MB/s; with {channels} concurrent channels {baseline:,.0f} records/s, "
        f"{best['par']['mbps']:.1f} MB/s.", "",
        f"## Where the time goes (cProfile of the sequential bare loop, client process, {wall:.1f} s)", "",
        "| bucket | own time |", "|---|---:|",
    ]
    out += [f"| {name} | {secs:.2f} s |" for name, secs in buckets]
    out += ["", "Top functions by own time:", "", "```"] + top + ["```", ""]
    out += [
        "Socket waits are the emulator working (and the transfer); PlainBuffer decoding is pure Python "
        "(~10 µs per record); HTTP and protobuf are minor. The worker adds no per-record work: per batch one "
        "queue hand-off (read_ahead ≥ 1), one metrics update and, every `checkpoint_interval_s`, one "
        "Checkpoint. With `read_ahead=1` the reader thread overlaps the next ReadRecords with processing, "
        "which is why the worker can beat a bare loop with the same number of threads.", "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    main()
