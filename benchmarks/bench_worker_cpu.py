"""CPU-seconds per 100,000 records of the TunnelWorker with a no-op processor: the compiled PlainBuffer decoder
against the pure-Python one (baseline), measured in one run on the same emulator and data.

Run: ``.venv/bin/python -m benchmarks.bench_worker_cpu [--rows 200000] [--rounds 3]``

One emulator process (``--base-channel-rows 20000``); a table of ``rows`` rows (an int key and four small
columns, as ``bench_tunnel_worker``), read through a fresh BaseData tunnel per measurement. Each measurement runs
in a child process of its own (the decoder is chosen at import, by ``TABLESTORE_PLAINBUFFER``), which times the
worker from ``start()`` to its last record: the CPU time of the whole client process (every thread: reads,
decode, heartbeats, checkpoints) and the wall time. Variants are interleaved over ``rounds``; the lowest CPU time
of each is kept. The issue's reference: the official Go SDK's TunnelDaemon used 0.47 CPU-seconds per 100,000
records draining a 200,000-row BaseData tunnel from this emulator (measured by the issue's author, not here).
The run writes ``benchmarks/results/worker_cpu.md`` (``--no-write`` to only print).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import load_user_rows

TABLE = "bench_worker_cpu"
RESULTS_FILE = Path(__file__).resolve().parent / "results" / "worker_cpu.md"
GO_TUNNEL_DAEMON_CPU_PER_100K = 0.47
VARIANTS = ("python", "c")


def child(endpoint: str, kwargs: dict[str, str], tunnel_id: str, rows: int) -> None:
    """Drain ``tunnel_id`` with a no-op TunnelWorker; print the implementation, CPU and wall seconds as JSON."""
    from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION
    from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
    from airflow_tablestore.client.tunnel.worker import TunnelWorker
    from benchmarks.common import CountingChannelProcessor, RecordCounter

    with TunnelClient(endpoint, **kwargs) as client:  # type: ignore[arg-type]
        counter = RecordCounter(rows)
        config = TunnelWorkerConfig(heartbeat_interval_s=5, checkpoint_interval_s=10, client_tag="bench",
                                    progress_log_interval_s=3600)
        worker = TunnelWorker(client, tunnel_id, CountingChannelProcessor(counter), config)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        worker.start()
        if not counter.done.wait(600):
            raise RuntimeError(f"worker delivered only {counter.count} of {rows} records")
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        worker.shutdown()
    if counter.count != rows:
        raise RuntimeError(f"{counter.count} records, expected {rows}")
    print(json.dumps({"implementation": IMPLEMENTATION, "cpu": cpu, "wall": wall}))


def measure(emulator: EmulatorProcess, tunnels: TunnelClient, variant: str, rows: int, n: int) -> dict[str, float]:
    tunnel_id = tunnels.create_tunnel(TABLE, f"cpu_{variant}_{n}", TunnelType.BASE_DATA)
    kwargs = {k: v for k, v in emulator.client_kwargs.items() if k != "endpoint"}
    spec = json.dumps({"endpoint": emulator.endpoint, "kwargs": kwargs, "tunnel_id": tunnel_id, "rows": rows})
    # the spec (with the emulator's secret) goes through the environment: never on a command line
    env = {**os.environ, "TABLESTORE_PLAINBUFFER": variant, "BENCH_WORKER_CPU_SPEC": spec}
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_worker_cpu", "--child"], env=env,
                         capture_output=True, text=True, check=True, timeout=900)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["implementation"] != variant:
        raise RuntimeError(f"asked for the {variant} decoder, the child used {result['implementation']}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS_FILE.name}")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        spec = json.loads(os.environ["BENCH_WORKER_CPU_SPEC"])
        child(spec["endpoint"], spec["kwargs"], spec["tunnel_id"], spec["rows"])
        return
    best: dict[str, dict[str, float]] = {}
    rounds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    emulator = EmulatorProcess(extra_args=["--base-channel-rows", "20000", "--log-level", "WARNING"])
    with emulator, TableClient(**emulator.client_kwargs) as tables, TunnelClient(**emulator.client_kwargs) as tunnels:
        print(f"loading {args.rows:,} rows ...", flush=True)
        load_user_rows(tables, TABLE, args.rows)
        for n in range(args.rounds):
            for variant in VARIANTS if n % 2 == 0 else VARIANTS[::-1]:
                result = measure(emulator, tunnels, variant, args.rows, n)
                per_100k = result["cpu"] / args.rows * 100_000
                rounds[variant].append(per_100k)
                print(f"round {n + 1} {variant:>6}: {per_100k:.3f} CPU-s per 100k records, "
                      f"{args.rows / result['wall']:,.0f} records/s", flush=True)
                if variant not in best or result["cpu"] < best[variant]["cpu"]:
                    best[variant] = result
    report = render(args, best, rounds, os.getloadavg()[0])
    print("\n" + report)
    if not args.no_write:
        RESULTS_FILE.write_text(report)
        print(f"wrote {RESULTS_FILE}")


def render(args: argparse.Namespace, best: dict[str, dict[str, float]], rounds: dict[str, list[float]],
           load: float) -> str:
    """The results file: setup, the table (lowest CPU of the rounds) and the per-round figures."""
    base = best["python"]["cpu"]
    names = {"python": "pure Python (baseline)", "c": "compiled (`_speedups`)"}
    rows = []
    for variant in VARIANTS:
        cpu = best[variant]["cpu"]
        per_100k = cpu / args.rows * 100_000
        rows.append(f"| {names[variant]} | {per_100k:.3f} | {args.rows / best[variant]['wall']:,.0f} | "
                    f"{cpu / base:.2f}x | {per_100k / GO_TUNNEL_DAEMON_CPU_PER_100K:.2f}x |")
    per_round = "; ".join(f"{'Python' if v == 'python' else 'compiled'} " + " / ".join(f"{x:.3f}" for x in rounds[v])
                          for v in VARIANTS)
    return "\n".join([
        "# TunnelWorker CPU per record: compiled decoder vs pure Python, and the Go SDK's TunnelDaemon",
        "",
        f"Command: `.venv/bin/python -m benchmarks.bench_worker_cpu --rows {args.rows} --rounds {args.rounds}`",
        "",
        f"One emulator process (`--base-channel-rows 20000`), a table of {args.rows:,} rows (int key + 4 small "
        "columns), a fresh BaseData tunnel per measurement. Each measurement is a child process of its own with "
        "`TABLESTORE_PLAINBUFFER` set to `python` or `c` (the decoder is chosen at import), timing a TunnelWorker "
        "with a no-op processor from `start()` to its last record: CPU seconds of the whole client process (every "
        "thread: reads, decode, heartbeats, checkpoints) and wall time. Variants interleaved over "
        f"{args.rounds} rounds, lowest CPU kept; every drain delivered exactly {args.rows:,} records. 2 vCPUs "
        f"shared with the emulator (load average {load:.1f} at the end of this run).",
        "",
        f"| decoder | CPU-s per 100k records | records/s | vs pure Python | vs Go TunnelDaemon "
        f"({GO_TUNNEL_DAEMON_CPU_PER_100K}) |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Per round (CPU-s per 100k): {per_round}.",
        "",
        f"The Go figure ({GO_TUNNEL_DAEMON_CPU_PER_100K} CPU-seconds per 100,000 records, the official Go SDK's "
        "TunnelDaemon draining a 200,000-row BaseData tunnel from this emulator) is the issue's measurement, not "
        "repeated here (no Go toolchain in this sandbox). Our pure-Python figure is to be compared with the "
        "issue's 1.18 for the same worker: their agreement is what makes the comparison meaningful.",
        "",
    ])


if __name__ == "__main__":
    main()
