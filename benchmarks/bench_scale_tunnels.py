"""How a triggerer's cost grows with the tunnels it watches: 1, 10 and 50 tunnels, each watched at once by a
deferred consume-point sensor and an ``AssetWatcher``'s changes trigger (the scale issue's tunnels axis).

Run: ``.venv/bin/python -m benchmarks.bench_scale_tunnels [--tunnels 1 10 50] [--poll 5] [--window 30]``

One emulator process serves 50 tables with their streams on, a Stream tunnel on each and ``--changes`` unconsumed
changes in each stream. For each point a child process plays the triggerer: one asyncio event loop running, per
tunnel, a :class:`TablestoreTunnelConsumePointTrigger` (cutoff in the future: it polls DescribeTunnel for ever)
and a :class:`TablestoreTunnelChangesTrigger` (thresholds never reached: it counts the backlog for ever), both
polling every ``--poll`` seconds, as Airflow's triggerer runs them. After one warm-up poll of every trigger (hooks
built, connections open, stream iterators placed), the child measures ``--window`` seconds: its CPU seconds,
peak threads, peak RSS, and the emulator's requests by API over the same window. The cost per trigger poll is
what a real interval (30 s by default for both triggers) divides: the report projects it to 30 s polls and says
how many tunnels one triggerer core carries.

Writes ``benchmarks/results/scale-tunnels.md`` and ``benchmarks/results/scale-tunnels.png`` (``--no-write`` to
only print).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import Column, RowWrite, StreamSpec, TunnelType, WriteType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import load_user_rows
from benchmarks.processes import process_cpu_s

RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS / "scale-tunnels.md"
CONN_ID = "tablestore_scale"
DEFAULT_INTERVAL_S = 30.0  # both triggers' default poll_interval


@dataclass
class TunnelsPoint:
    """One triggerer process watching ``tunnels`` tunnels (two triggers each) for one window."""

    tunnels: int
    poll_s: float
    window_s: float
    polls: int
    cpu_s: float
    peak_threads: int
    peak_rss_mb: float
    emulator_cpu_s: float
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def cpu_ms_per_poll(self) -> float:
        return 1000 * self.cpu_s / self.polls

    @property
    def requests_per_poll(self) -> float:
        return sum(self.requests.values()) / self.polls

    def core_share_at(self, interval_s: float) -> float:
        """Fraction of one core the triggers use when each polls every ``interval_s`` seconds."""
        return self.cpu_ms_per_poll / 1000 * 2 * self.tunnels / interval_s


def child() -> None:
    """Run the triggers of ``BENCH_TUNNELS_SPEC`` in one event loop; print one JSON line of measurements."""
    from airflow_tablestore.emulator.control import ControlClient
    from airflow_tablestore.triggers.changes import TablestoreTunnelChangesTrigger
    from airflow_tablestore.triggers.tunnel import TablestoreTunnelConsumePointTrigger

    spec = json.loads(os.environ["BENCH_TUNNELS_SPEC"])
    control = ControlClient(spec["endpoint"], os.environ["BENCH_TUNNELS_SECRET"])
    hook_params = {"tablestore_conn_id": CONN_ID}
    far_future_ns = (int(time.time()) + 10 * 365 * 86400) * 10**9
    triggers: list[Any] = []
    for table in spec["tables"]:
        triggers.append(TablestoreTunnelConsumePointTrigger(
            table_name=table, tunnel_name="watched", cutoff_ns=far_future_ns, hook_params=hook_params,
            poll_interval=spec["poll_s"]))
        triggers.append(TablestoreTunnelChangesTrigger(
            table_name=table, tunnel_name="watched", min_records=10**9, max_delay=10**9,
            poll_interval=spec["poll_s"], hook_params=hook_params))
    peak = [threading.active_count()]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], threading.active_count())
            await asyncio.sleep(0.2)

    async def drive(trigger: Any) -> None:
        async for event in trigger.run():
            raise RuntimeError(f"a trigger fired: {event}")  # neither may fire: the window would end early

    async def main() -> dict[str, Any]:
        tasks = [asyncio.create_task(drive(t)) for t in triggers]
        sampler = asyncio.create_task(sample())
        # the first poll of every trigger (hook, connection, stream iterators) happens within the first interval
        await asyncio.sleep(spec["poll_s"] * 1.5)
        for task in tasks:
            if task.done():
                task.result()  # a failed trigger fails the benchmark
        peak[0] = threading.active_count()
        control.request_counts(reset=True)
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(spec["window_s"])
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        requests = control.request_counts()
        for task in tasks:
            if task.done():
                task.result()
            task.cancel()
        sampler.cancel()
        await asyncio.gather(*tasks, sampler, return_exceptions=True)
        return {"cpu": cpu, "wall": wall, "requests": requests, "threads": peak[0]}

    out = asyncio.run(main())
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def prepare(emu: EmulatorProcess, tables: int, changes: int) -> list[str]:
    """``tables`` tables with their streams on, each with a Stream tunnel and ``changes`` unconsumed changes."""
    names = [f"scale_t{i:02d}" for i in range(tables)]
    with TableClient(**emu.client_kwargs) as client, TunnelClient(**emu.client_kwargs) as tunnels:
        for name in names:
            load_user_rows(client, name, changes, stream=StreamSpec(enabled=True, expiration_hours=24))
            tunnels.create_tunnel(name, "watched", TunnelType.STREAM)
            client.write_rows(RowWrite(name, WriteType.UPDATE, (("id", i),), (Column("score", -i),))
                              for i in range(changes))
    return names


def measure(emu: EmulatorProcess, tables: list[str], poll_s: float, window_s: float) -> TunnelsPoint:
    assert emu.process is not None
    spec = {"endpoint": emu.endpoint, "tables": tables, "poll_s": poll_s, "window_s": window_s}
    home = tempfile.mkdtemp(prefix="bench-tunnels-airflow-")
    # the connection (with the emulator's secret) goes through the environment, never on a command line
    env = {**os.environ, "BENCH_TUNNELS_SPEC": json.dumps(spec), "AIRFLOW_HOME": home,
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "BENCH_TUNNELS_SECRET": emu.access_key_secret,
           f"AIRFLOW_CONN_{CONN_ID.upper()}": emu.airflow_connection_json()}
    emu_cpu = process_cpu_s(emu.process.pid)
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_scale_tunnels", "--child"], env=env,
                         capture_output=True, text=True, timeout=window_s + 20 * poll_s + 300)
    if out.returncode != 0:
        raise RuntimeError(f"triggerer child failed:\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    polls = round(2 * len(tables) * got["wall"] / poll_s)
    # the emulator's CPU covers warm-up too; per poll it is an upper bound
    point = TunnelsPoint(len(tables), poll_s, got["wall"], polls, got["cpu"], got["threads"], got["rss_mb"],
                         process_cpu_s(emu.process.pid) - emu_cpu, dict(got["requests"]))
    print(f"  {point.tunnels} tunnels: {point.cpu_ms_per_poll:.2f} ms CPU / poll, {point.requests_per_poll:.2f} "
          f"requests / poll, {point.peak_threads} threads, {point.peak_rss_mb:.0f} MB", flush=True)
    return point


def report(points: list[TunnelsPoint], command: str, changes: int) -> str:
    apis = sorted({api for p in points for api in p.requests})
    lines = [
        "# Scale: a triggerer watching many tunnels",
        "",
        f"Command: `{command}`",
        "",
        "Each point: one child process runs Airflow's two Tablestore triggers per tunnel in one event loop (a "
        "deferred `TablestoreTunnelConsumePointSensor`'s trigger and an `AssetWatcher`'s "
        f"`TablestoreTunnelChangesTrigger`), every trigger polling every {points[0].poll_s:g} s, against one "
        f"emulator process; each tunnel is a Stream tunnel with {changes} unconsumed changes in its table's "
        "stream. Measured over the window after every trigger's first poll: the child's CPU (all threads), its "
        "peak threads and RSS, and the emulator's requests by API. \"Polls\" counts trigger polls in the window "
        "(2 triggers per tunnel); \"core at 30 s\" is the share of one core the triggers take at their default "
        "30 s interval.",
        "",
        "| tunnels | triggers | polls | CPU ms / poll | requests / poll | core at 30 s | peak threads | peak RSS MB "
        "| emulator CPU-s | " + " | ".join(f"{api} / s" for api in apis) + " |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(apis),
    ]
    for p in points:
        per_s = [f"{p.requests.get(api, 0) / p.window_s:.2f}" for api in apis]
        lines.append(
            f"| {p.tunnels} | {2 * p.tunnels} | {p.polls} | {p.cpu_ms_per_poll:.2f} | {p.requests_per_poll:.2f} "
            f"| {100 * p.core_share_at(DEFAULT_INTERVAL_S):.2f}% | {p.peak_threads} | {p.peak_rss_mb:.0f} "
            f"| {p.emulator_cpu_s:.1f} | " + " | ".join(per_s) + " |")
    lines += ["", *summary(points), "", "![scale-tunnels](benchmarks/results/scale-tunnels.png)", ""]
    return "\n".join(lines)


def summary(points: list[TunnelsPoint]) -> list[str]:
    few, many = points[0], points[-1]
    growth = many.tunnels / few.tunnels
    cpu_ratio = many.cpu_s / few.cpu_s
    req_ratio = sum(many.requests.values()) / max(1, sum(few.requests.values()))
    per_poll = many.cpu_ms_per_poll / 1000
    carried = int(0.5 * DEFAULT_INTERVAL_S / (2 * per_poll))
    return [
        f"- {few.tunnels} → {many.tunnels} tunnels ({growth:.0f}x): triggerer CPU {cpu_ratio:.1f}x, requests "
        f"{req_ratio:.1f}x, CPU per poll {few.cpu_ms_per_poll:.2f} → {many.cpu_ms_per_poll:.2f} ms, threads "
        f"{few.peak_threads} → {many.peak_threads} (the polls run in asyncio's default thread pool, whose size "
        "does not follow the trigger count), peak RSS "
        f"{few.peak_rss_mb:.0f} → {many.peak_rss_mb:.0f} MB.",
        f"- Capacity: at {many.cpu_ms_per_poll:.1f} ms of CPU per poll and the default 30 s interval, one triggerer "
        f"core carries about {carried:,} watched tunnels (two triggers each) at half its time. "
        + ("Airflow's `[triggerer] capacity` (1,000 triggers by default: 500 tunnels with both triggers) is the "
           "first limit, not the Tablestore triggers' CPU." if carried > 500 else
           "That is below Airflow's `[triggerer] capacity` (1,000 triggers by default): run more triggerers "
           "past it."),
        f"- Requests per tunnel per 30 s: {many.requests_per_poll * 2:.1f} (DescribeTunnel for the sensor; "
        "DescribeTunnel plus the stream reads that count the backlog for the changes trigger).",
    ]


def chart(points: list[TunnelsPoint]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.tunnels for p in points]
    fig, (cpu, per_poll, requests) = plt.subplots(1, 3, figsize=(13, 4))
    cpu.plot(xs, [100 * p.cpu_s / p.window_s for p in points], marker="o")
    cpu.set_ylabel("triggerer CPU, % of one core")
    cpu.set_yscale("log")
    per_poll.plot(xs, [p.cpu_ms_per_poll for p in points], marker="o", label="CPU ms per poll")
    per_poll.plot(xs, [p.peak_threads for p in points], marker="s", label="peak threads")
    per_poll.set_ylim(bottom=0)
    per_poll.legend()
    requests.plot(xs, [sum(p.requests.values()) / p.window_s for p in points], marker="o")
    requests.set_ylabel("requests per s to the service")
    requests.set_yscale("log")
    for ax in (cpu, per_poll, requests):
        ax.set_xscale("log")
        ax.set_xlabel(f"tunnels watched (2 triggers each, {points[0].poll_s:g} s polls)")
        ax.grid(True, alpha=0.3)
    fig.suptitle("Triggerer cost against tunnels")
    fig.tight_layout()
    fig.savefig(RESULTS / "scale-tunnels.png", dpi=80)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tunnels", type=int, nargs="+", default=[1, 10, 50])
    ap.add_argument("--poll", type=float, default=5.0, help="every trigger's poll_interval (s)")
    ap.add_argument("--window", type=float, default=30.0, help="measured seconds per point")
    ap.add_argument("--changes", type=int, default=200, help="unconsumed changes per tunnel")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child()
        return
    counts = sorted(args.tunnels)
    with EmulatorProcess(extra_args=["--log-level", "WARNING"]) as emu:
        started = time.monotonic()
        tables = prepare(emu, counts[-1], args.changes)
        print(f"  {len(tables)} tables and tunnels ready in {time.monotonic() - started:.0f} s", flush=True)
        points = []
        for count in counts:
            print(f"== {count} tunnels", flush=True)
            points.append(measure(emu, tables[:count], args.poll, args.window))
    command = "python -m benchmarks.bench_scale_tunnels " + " ".join(sys.argv[1:])
    text = report(points, command, args.changes)
    print(text)
    if not args.no_write:
        chart(points)
        RESULTS_FILE.write_text(text)
        (RESULTS / "scale-tunnels.json").write_text(json.dumps([asdict(p) for p in points], indent=1))


if __name__ == "__main__":
    main()
