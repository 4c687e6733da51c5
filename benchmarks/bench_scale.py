"""How the TunnelWorker's cost grows with rows and with channels: points of a curve, measured in one run.

Run: ``.venv/bin/python -m benchmarks.bench_scale [--axis rows|channels|both] [--scale 1.0] [--client-tree DIR]``

Points (``--scale`` multiplies every row count; the issue's points are ``--scale 1``):

* rows: 250,000 and 2,500,000 rows at 16 channels (16 stream partitions, base channels of rows/16 rows);
* channels: 4, 64 and 256 channels (stream partitions and base channels alike) at 1,000,000 rows.

At each point one emulator process serves a table of ``rows`` rows (int key, four small columns) with its stream
on: the rows are loaded once per row count and cached (:mod:`benchmarks.scale_data`), and the point's emulator runs
on a copy with ``channels`` stream partitions. One BaseAndStream tunnel per measured client is created, then
every row is updated once, so every tunnel holds the same ``rows`` base records and ``rows`` stream records.
Each client drains its tunnel in a child process of its own (a TunnelWorker with the default configuration
and a no-op processor), timed from ``start()`` to its last record: CPU seconds of the client process (all its
threads), wall time, the peak number of threads (sampled every 20 ms), peak RSS, and the
emulator's CPU seconds and requests by API over the same span (the emulator's control op ``requests``).
``--client-tree DIR`` adds a second client: the same child run from another checkout (a git worktree of an older
revision, with the compiled decoder copied in), so a change is measured before and after on the same data in one
run.

The run writes ``benchmarks/results/scale.md`` and the charts ``benchmarks/results/scale-*.png`` (``--no-write``
to only print).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from benchmarks.common import ROOT
from benchmarks.processes import process_cpu_s

RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS / "scale.md"
ROWS_POINTS = ((250_000, 16), (2_500_000, 16))
CHANNEL_POINTS = ((1_000_000, 4), (1_000_000, 64), (1_000_000, 256))
STREAM_WORKER = "StreamWorker"
STREAM_STATUS_TABLE = "bench_scale_status"
STREAM_APIS = ("/GetStreamRecord", "/GetShardIterator", "/UpdateRow", "/BatchWriteRow")
LEASE_WRITES = ("/PutRow", "/UpdateRow", "/BatchWriteRow")
"""The StreamWorker's writes to its status table: lease creation, takeovers, renewals and checkpoints."""
TUNNEL_APIS = ("/tunnel/readrecords", "/tunnel/heartbeat", "/tunnel/checkpoint", "/tunnel/getcheckpoint")


@dataclass
class Measurement:
    """One client's drain of one tunnel at one point."""

    client: str
    rows: int
    channels: int
    records: int
    cpu_s: float
    wall_s: float
    peak_threads: int
    peak_rss_mb: float
    emulator_cpu_s: float
    requests: dict[str, int] = field(default_factory=dict)
    cpu_runs: list[float] = field(default_factory=list)
    """The CPU seconds of every run at this point (``--repeat``); the other fields are the median run's."""

    def per_100k(self, value: float) -> float:
        return value * 100_000 / self.records


def child() -> None:
    """Drain what ``BENCH_SCALE_SPEC`` names with a default worker and a no-op processor; print JSON: the
    TunnelWorker its tunnel, the StreamWorker (``"system": "StreamWorker"``) the table's stream."""
    from benchmarks.common import RecordCounter

    spec = json.loads(os.environ["BENCH_SCALE_SPEC"])
    peak = [threading.active_count()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], threading.active_count())

    counter = RecordCounter(spec["records"])
    stream = spec.get("system") == "StreamWorker"
    client_cls: Any = TableClient if stream else TunnelClient
    with client_cls(spec["endpoint"], **spec["kwargs"]) as client:
        worker = stream_worker(client, spec, counter) if stream else tunnel_worker(client, spec, counter)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        worker.start()
        if not counter.done.wait(3600):
            raise RuntimeError(f"worker delivered only {counter.count} of {spec['records']} records")
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stop.set()
        worker.shutdown()
    if counter.count != spec["records"]:
        raise RuntimeError(f"{counter.count} records, expected {spec['records']}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # the sampler thread itself is not the worker's
    print(json.dumps({"cpu": cpu, "wall": wall, "threads": peak[0] - 1, "rss_mb": rss_mb}))


def tunnel_worker(client: TunnelClient, spec: dict[str, Any], counter: Any) -> Any:
    from airflow_tablestore.client.tunnel.worker import TunnelWorker
    from benchmarks.common import CountingChannelProcessor

    return TunnelWorker(client, spec["tunnel_id"], CountingChannelProcessor(counter), worker_config())


def stream_worker(client: TableClient, spec: dict[str, Any], counter: Any) -> Any:
    """A StreamWorker with the default configuration (quiet progress line), a fresh status table and a no-op
    processor that checkpoints after every batch."""
    from airflow_tablestore.client.stream.config import StreamWorkerConfig
    from airflow_tablestore.client.stream.worker import StreamWorker
    from benchmarks.bench_stream_worker import NoOpShardProcessor

    config = StreamWorkerConfig(status_table=spec["status_table"], worker_id="bench", progress_log_interval_s=3600)
    return StreamWorker(client, spec["table"], lambda shard: NoOpShardProcessor(counter), config)


def stream_worker_label(client: str, clients: int) -> str:
    """How the results name a tree's StreamWorker: ``StreamWorker``, or ``StreamWorker (before)`` beside
    another tree."""
    return STREAM_WORKER if clients == 1 else f"{STREAM_WORKER} ({client})"


def is_stream_worker(m: Measurement) -> bool:
    return m.client.startswith(STREAM_WORKER)


def worker_config() -> Any:
    """The default configuration, with a quiet progress line and a short heartbeat (both revisions accept it)."""
    from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig

    return TunnelWorkerConfig(heartbeat_interval_s=5, client_tag="bench", progress_log_interval_s=3600)


def measure_point(rows: int, channels: int, clients: dict[str, Path], with_stream_worker: bool,
                  repeat: int = 1) -> list[Measurement]:
    """Each client's TunnelWorker drains its own tunnel, then (``with_stream_worker``) each client's StreamWorker
    drains the table's stream (the ``rows`` changes), one child process each; ``repeat`` times over (a tunnel and
    a status table per run, the clients taking turns), keeping each client's run of median CPU."""
    # imported here: the child runs this file from older trees, whose benchmarks package may not have it
    from benchmarks.scale_data import TABLE, scale_point, write_changes

    with scale_point(rows, channels) as point, TableClient(**point.emulator.client_kwargs) as tables, \
            TunnelClient(**point.emulator.client_kwargs) as tunnels:
        started = time.monotonic()
        tunnel_ids = {(name, rep): tunnels.create_tunnel(TABLE, f"scale_{name}_{rep}", TunnelType.BASE_AND_STREAM)
                      for rep in range(repeat) for name in clients}
        changes = write_changes(tables, rows)
        print(f"  {rows:,} rows at {channels} channels: base load {point.load_s:.0f} s (0: cached), copy and "
              f"stream on {point.copy_s:.1f} s, tunnels + {changes:,} changes {time.monotonic() - started:.0f} s",
              flush=True)
        runs: list[tuple[str, Path, dict[str, Any]]] = []
        for rep in range(repeat):
            runs += [(name, tree, {"tunnel_id": tunnel_ids[name, rep], "records": rows + changes})
                     for name, tree in clients.items()]
            if with_stream_worker:  # each tree's StreamWorker from the start of the stream, its own status table
                runs += [(stream_worker_label(name, len(clients)), tree,
                          {"system": STREAM_WORKER, "table": TABLE, "records": changes,
                           "status_table": f"{STREAM_STATUS_TABLE}_{number}_{rep}"})
                         for number, (name, tree) in enumerate(clients.items())]
        measured: dict[str, list[Measurement]] = {}
        for name, tree, spec in runs:
            m = run_child(point.emulator, name, tree, spec, rows, channels)
            print(f"  {name}: {m.per_100k(m.cpu_s):.3f} CPU-s/100k, {m.wall_s:.1f} s, {m.peak_threads} threads, "
                  f"{m.peak_rss_mb:.0f} MB, requests {sum(m.requests.values())}", flush=True)
            measured.setdefault(name, []).append(m)
        results = []
        for mine in measured.values():
            median = sorted(mine, key=lambda m: m.cpu_s)[(len(mine) - 1) // 2]
            results.append(replace(median, cpu_runs=[m.cpu_s for m in mine]))
        return results


def run_child(emu: Any, name: str, tree: Path, spec: dict[str, Any], rows: int, channels: int) -> Measurement:
    """One measured child process (``--child``) running ``tree``'s package."""
    assert emu.process is not None
    kwargs = {k: v for k, v in emu.client_kwargs.items() if k != "endpoint"}
    spec = {**spec, "endpoint": emu.endpoint, "kwargs": kwargs}
    # the spec (with the emulator's secret) goes through the environment, never on a command line
    # the tree's package (and its benchmarks.common) first; this script runs from this tree
    env = {**os.environ, "BENCH_SCALE_SPEC": json.dumps(spec), "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
    emu.control.request_counts(reset=True)
    emu_cpu = process_cpu_s(emu.process.pid)
    out = subprocess.run([sys.executable, __file__, "--child"], env=env, cwd=tree,
                         capture_output=True, text=True, timeout=7200)
    if out.returncode != 0:
        raise RuntimeError(f"{name} client failed:\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return Measurement(name, rows, channels, spec["records"], got["cpu"], got["wall"], got["threads"],
                       got["rss_mb"], process_cpu_s(emu.process.pid) - emu_cpu, emu.control.request_counts())


def report(results: list[Measurement], command: str, clients: dict[str, str]) -> str:
    """The results file: ``clients`` maps each TunnelWorker client to the tree it ran ("this tree" or a
    checkout's name)."""
    tunnel = [m for m in results if not is_stream_worker(m)]
    stream = [m for m in results if is_stream_worker(m)]
    lines = [
        "# Scale: the TunnelWorker and the StreamWorker against rows and channels",
        "",
        f"Command: `{command}`",
        "",
        "Each point: one emulator process, a table of `rows` rows (int key + 4 small columns) with its stream on, "
        "one BaseAndStream tunnel per client holding `rows` base records and `rows` stream records (every row "
        "updated once); `channels` is both the stream partitions and the number of base channels. The rows are loaded "
        "once per row count (stream off) and each point runs on a copy with its stream enabled "
        "(`benchmarks/scale_data.py`), so the stream holds only the changes. Each client drains its tunnel in a "
        "child process (a default `TunnelWorker`, no-op processor), timed from `start()` to the last record; "
        "then a `StreamWorker` (default configuration, fresh status table, no-op processor checkpointing every "
        "batch) drains the table's stream, the `rows` changes over `channels` shards. CPU "
        "is the client process's (every thread); the emulator's CPU and requests cover the same span. 2 vCPUs "
        "shared by the client and the emulator (absolute figures follow the machine's load: compare within a point). "
        "Clients (TunnelWorker and StreamWorker alike): "
        + ", ".join(f"`{name}` ({tree})" for name, tree in clients.items()) + ".",
        "",
        "| client | rows | channels | records | CPU-s / 100k | wall s | records/s | peak threads | peak RSS MB "
        "| emulator CPU-s / 100k | ReadRecords / 100k | Heartbeat / 100k | Checkpoint / 100k | GetCheckpoint / 100k "
        "| every run's CPU-s / 100k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in tunnel:
        per_api = [f"{m.per_100k(m.requests.get(api, 0)):.1f}" for api in TUNNEL_APIS]
        lines.append(
            f"| {m.client} | {m.rows:,} | {m.channels} | {m.records:,} | {m.per_100k(m.cpu_s):.3f} | {m.wall_s:.1f} "
            f"| {m.records / m.wall_s:,.0f} | {m.peak_threads} | {m.peak_rss_mb:.0f} "
            f"| {m.per_100k(m.emulator_cpu_s):.3f} | " + " | ".join(per_api) + f" | {runs(m)} |")
    if stream:
        lines += [
            "",
            "StreamWorker (`records` = the changes; `shards` = `channels`; UpdateRow = lease renewals, takeovers "
            "and checkpoints):",
            "",
            "| client | rows | shards | records | CPU-s / 100k | wall s | records/s | peak threads | peak RSS MB "
            "| emulator CPU-s / 100k | GetStreamRecord / 100k | GetShardIterator / 100k | UpdateRow / 100k "
            "| BatchWriteRow / 100k | lease and checkpoint writes / s | requests / 100k | every run's CPU-s / 100k |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for m in stream:
            lines.append(
                f"| {m.client} | {m.rows:,} | {m.channels} | {m.records:,} | {m.per_100k(m.cpu_s):.3f} "
                f"| {m.wall_s:.1f} | {m.records / m.wall_s:,.0f} | {m.peak_threads} | {m.peak_rss_mb:.0f} "
                f"| {m.per_100k(m.emulator_cpu_s):.3f} | " + " | ".join(
                    f"{m.per_100k(m.requests.get(api, 0)):.1f}" for api in STREAM_APIS)
                + f" | {lease_writes(m) / m.wall_s:.2f} | {m.per_100k(sum(m.requests.values())):.1f} | {runs(m)} |")
    lines += ["", *ratios(results), ""]
    for chart in (RESULTS / "scale-rows.png", RESULTS / "scale-channels.png"):
        if not chart.exists():
            continue
        lines += [f"![{chart.stem}](benchmarks/results/{chart.name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def runs(m: Measurement) -> str:
    return " / ".join(f"{m.per_100k(cpu):.3f}" for cpu in sorted(m.cpu_runs or [m.cpu_s]))


def lease_writes(m: Measurement) -> int:
    return sum(m.requests.get(api, 0) for api in LEASE_WRITES)


def ratios(results: list[Measurement]) -> list[str]:
    """The growth the issue bounds: 10x rows (CPU and wall at most 10.5x, memory within 1.2x) and 256 vs 4
    channels (CPU per record within 1.2x)."""
    out = []
    for client in dict.fromkeys(m.client for m in results):
        mine = {(m.rows, m.channels): m for m in results if m.client == client}
        rows_points = sorted(k for k in mine if k[1] == 16)
        if len(rows_points) >= 2:
            small, big = mine[rows_points[0]], mine[rows_points[-1]]
            factor = big.rows / small.rows
            out.append(f"- `{client}`, {factor:.0f}x rows: CPU {big.cpu_s / small.cpu_s:.2f}x, wall "
                       f"{big.wall_s / small.wall_s:.2f}x, peak RSS {big.peak_rss_mb / small.peak_rss_mb:.2f}x, "
                       f"threads {small.peak_threads} → {big.peak_threads}; the emulator's CPU per record "
                       f"{big.per_100k(big.emulator_cpu_s) / small.per_100k(small.emulator_cpu_s):.2f}x.")
        channel_rows = channel_axis_rows(list(mine.values()))
        channel_points = sorted((k for k in mine if k[0] == channel_rows), key=lambda k: k[1])
        if len(channel_points) >= 2 and channel_points[0][1] != channel_points[-1][1]:
            few, many = mine[channel_points[0]], mine[channel_points[-1]]
            stream = is_stream_worker(few)
            beats = "lease and checkpoint writes" if stream else "heartbeats"
            rate = ((lambda m: lease_writes(m) / m.wall_s) if stream
                    else (lambda m: m.requests.get("/tunnel/heartbeat", 0) / m.wall_s))
            out.append(f"- `{client}`, {few.channels} → {many.channels} channels: CPU per record "
                       f"{many.per_100k(many.cpu_s) / few.per_100k(few.cpu_s):.2f}x, threads {few.peak_threads} → "
                       f"{many.peak_threads}, {beats} per second {rate(few):.2f} → {rate(many):.2f}.")
            requests = sum(many.requests.values()) - sum(few.requests.values())
            if many.cpu_s <= few.cpu_s:
                out.append(f"  No fixed cost per channel shows at this size: the client's CPU fell from "
                           f"{few.cpu_s:.2f} to {many.cpu_s:.2f} s as the drain took {many.wall_s:.0f} s instead of "
                           f"{few.wall_s:.0f} s (more channels read at once), so costs paid per second (heartbeats, "
                           f"idle polls) ran for less time; {requests} more requests in all.")
            elif stream:
                extra = many.channels - few.channels
                out.append(f"  Each further shard cost the client {1000 * (many.cpu_s - few.cpu_s) / extra:.1f} ms "
                           f"of CPU and {requests / extra:.1f} requests (its lease, iterator and reads).")
            else:
                # a tunnel of N channels has N base and N stream channels; the records are the same at both points
                extra = 2 * (many.channels - few.channels)
                out.append(f"  Each further channel cost the client {1000 * (many.cpu_s - few.cpu_s) / extra:.1f} "
                           f"ms of CPU and {requests / extra:.1f} requests (GetCheckpoint, the last Checkpoint, its "
                           "ReadRecords): a fixed cost per channel, which records amortize.")
    return out


def channel_axis_rows(results: list[Measurement]) -> int:
    """The row count of the channel axis: the one measured at the most channel counts."""
    by_rows: dict[int, set[int]] = {}
    for m in results:
        by_rows.setdefault(m.rows, set()).add(m.channels)
    return max(by_rows, key=lambda rows: (len(by_rows[rows]), rows))


def charts(results: list[Measurement]) -> None:
    """CPU per 100k records and peak threads against channels, and CPU and wall against rows (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    channel_rows = channel_axis_rows(results)
    for axis, key, title in (("channels", "channels", "channels (rows fixed)"),
                             ("rows", "rows", "rows (16 channels)")):
        points = [m for m in results if (m.channels == 16 if axis == "rows" else m.rows == channel_rows)]
        if len({getattr(m, key) for m in points}) < 2:
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for client in dict.fromkeys(m.client for m in points):
            mine = sorted((m for m in points if m.client == client), key=lambda m: getattr(m, key))
            xs = [getattr(m, key) for m in mine]
            if axis == "channels":
                left.plot(xs, [m.per_100k(m.cpu_s) for m in mine], marker="o", label=client)
                right.plot(xs, [m.peak_threads for m in mine], marker="o", label=client)
            else:
                left.plot(xs, [m.cpu_s for m in mine], marker="o", label=client)
                right.plot(xs, [m.wall_s for m in mine], marker="o", label=client)
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel(title)
            ax.grid(True, alpha=0.3)
            ax.legend()
        left.set_ylabel("client CPU-s per 100k records" if axis == "channels" else "client CPU-s")
        right.set_ylabel("peak threads" if axis == "channels" else "wall s")
        fig.suptitle(f"TunnelWorker and StreamWorker cost against {axis}")
        fig.tight_layout()
        fig.savefig(RESULTS / f"scale-{axis}.png", dpi=80)
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axis", choices=("rows", "channels", "both"), default="both")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every row count")
    ap.add_argument("--client-tree", type=Path, help="another checkout whose client is measured beside this one")
    ap.add_argument("--no-stream-worker", action="store_true", help="measure the TunnelWorker only")
    ap.add_argument("--repeat", type=int, default=1,
                    help="drains per client and point; the run of median CPU is reported, with every run's CPU")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild the report and charts from the last run's scale.json (keeping the run notes)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child()
        return
    if args.report_only:
        saved = json.loads((RESULTS / "scale.json").read_text())
        measured = [Measurement(**m) for m in saved["results"]]
        old = RESULTS_FILE.read_text()
        # the run notes written beside the generated part are kept
        notes = old[old.index("\nRun notes"):] if "\nRun notes" in old else ""
        charts(measured)
        RESULTS_FILE.write_text(report(measured, saved["command"], saved["clients"]) + notes)
        return
    trees = {"this tree": ROOT}
    if args.client_tree:
        trees = {"before": args.client_tree.resolve(), "after": ROOT}
    clients = {name: "this tree" if tree == ROOT else tree.name for name, tree in trees.items()}
    command = "python -m benchmarks.bench_scale " + " ".join(sys.argv[1:])
    points: list[tuple[int, int]] = []
    if args.axis in ("rows", "both"):
        points += ROWS_POINTS
    if args.axis in ("channels", "both"):
        points += CHANNEL_POINTS
    results: list[Measurement] = []
    for rows, channels in points:
        rows = int(rows * args.scale)
        print(f"== {rows:,} rows, {channels} channels", flush=True)
        results += measure_point(rows, channels, trees, not args.no_stream_worker, args.repeat)
        if not args.no_write:  # kept after every point: a long run stopped midway keeps what it measured
            saved = {"command": command, "clients": clients, "results": [asdict(m) for m in results]}
            (RESULTS / "scale.json").write_text(json.dumps(saved, indent=1))
    print(report(results, command, clients))
    if not args.no_write:
        charts(results)
        RESULTS_FILE.write_text(report(results, command, clients))


if __name__ == "__main__":
    main()
