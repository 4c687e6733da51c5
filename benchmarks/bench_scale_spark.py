"""How Spark's cost grows with rows and with channels: ``spark-submit`` runs of the consumer's two phases and of
the data source (``spark.read``, ``readStream``) at the points of ``bench_scale``, measured in one run.

Run: ``.venv/bin/python -m benchmarks.bench_scale_spark [--axis rows|channels|both] [--scale 1.0]``

Points (``--scale`` multiplies every row count, as in ``bench_scale``): rows 250,000 and 2,500,000 at 16 channels;
channels 4, 64 and 256 at 1,000,000 rows. At each point one emulator process serves a table of ``rows`` rows with
its stream on (``channels`` stream partitions and BaseData channels of rows/channels rows; the rows are loaded once
per row count and cached, :mod:`benchmarks.scale_data`); a BaseAndStream tunnel is created, every row is updated
once, and the consumer runs twice with real ``spark-submit --master local[2]`` into a Parquet change log: the full
phase, then the incremental phase up to a cutoff after the last update. For each run: wall time; CPU seconds of the
driver's JVM (in local mode it also runs the executors' JVM side), of the driver's Python process and of the
executors' Python workers, sampled from /proc every 0.2 s; peak RSS of each, and the JVM's heap in use after a
collection (its ``-Xlog:gc`` file: what it retains, where its RSS follows the heap the collector grew); the records,
rounds and the Python workers' peak RSS from the consumer's summary line; Spark tasks from the run's event log; the
emulator's CPU and requests by API. Then the data source's two jobs (:mod:`benchmarks.scale_spark_jobs`, into
Spark's ``noop`` sink): ``spark.read`` of the whole table, and ``readStream`` of a third BaseAndStream tunnel with
``availableNow``, measured the same way.

``--compare-tree DIR`` also runs both phases of every point with the consumer of another checkout (an older
revision with its C extension built in place: ``git archive REV | tar -x -C DIR`` and ``python -c "from setuptools
import setup; setup()" build_ext --inplace`` there), on a second tunnel of the same table, so that both read the same
data in one run; the two alternate which goes first at each point. Its rows are marked with ``--compare-label``.

Writes ``benchmarks/results/scale-spark.md`` and ``benchmarks/results/scale-spark-*.png`` (``--no-write`` to
only print).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer.job import application_path
from benchmarks.processes import TreeSampler, process_cpu_s
from benchmarks.scale_data import TABLE, scale_point, write_changes

TUNNEL = "scale_spark"
RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS / "scale-spark.md"
ROWS_POINTS = ((250_000, 16), (2_500_000, 16))
CHANNEL_POINTS = ((1_000_000, 4), (1_000_000, 64), (1_000_000, 256))
KINDS = ("jvm", "driver python", "executor python")
PHASES = ("full", "incremental", "spark.read", "readStream")
"""What is measured at each point: the consumer's two phases, then the data source's two jobs."""
STREAM_TUNNEL = "scale_stream"
JOBS_APP = Path(__file__).resolve().parent / "scale_spark_jobs.py"
APPLICATIONS = ("tablestore_consumer.py", JOBS_APP.name)
APIS = ("/tunnel/readrecords", "/tunnel/heartbeat", "/tunnel/checkpoint", "/tunnel/getcheckpoint", "/GetRange")
ROW_WRITES = ("/PutRow", "/UpdateRow", "/BatchWriteRow")
"""The row writes of a run: the streaming source's positions table (the consumer's sink here is Parquet)."""


@dataclass
class SparkRun:
    """One ``spark-submit`` of one phase at one point."""

    phase: str
    rows: int
    channels: int
    records: int
    rounds: int
    tasks: int
    wall_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    task_rss_mb: float = 0.0
    emulator_cpu_s: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    code: str = "this tree"
    peak_threads: dict[str, int] = field(default_factory=dict)
    heap_after_gc_mb: float = 0.0
    """The JVM's heap in use after a collection, at its highest (the GC log; 0: not measured): what the JVM retains,
    where its resident size also holds whatever the collector let the heap grow to inside ``-Xmx``."""

    def per_100k(self, value: float) -> float:
        return value * 100_000 / self.records if self.records else 0.0


_GC_LINE = re.compile(r"(\d+)M->(\d+)M\((\d+)M\)")


def heap_after_gc_mb(gc_log: Path) -> float:
    """The highest heap occupancy right after a collection in a ``-Xlog:gc`` file ("GC(3) Pause Young ...
    120M->35M(256M)")."""
    if not gc_log.exists():
        return 0.0
    after = [int(m.group(2)) for m in _GC_LINE.finditer(gc_log.read_text())]
    return float(max(after, default=0))


def classify(cmdline: str) -> str:
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "executor python"
    if any(app in cmdline for app in APPLICATIONS) and "java" not in cmdline.split(" ", 1)[0]:
        return "driver python"
    if cmdline.split(" ", 1)[0].endswith("java"):
        return "jvm"
    return "other"


@dataclass(frozen=True)
class Code:
    """Which consumer a run submits: this tree's, or another checkout's (``tree``, put first on PYTHONPATH)."""

    label: str = "this tree"
    tree: Path | None = None
    tunnel: str = TUNNEL

    def application(self) -> str:
        if self.tree is None:
            return application_path()
        return str(self.tree / Path(application_path()).relative_to(Path(__file__).resolve().parent.parent))


def consumer_env(emu: EmulatorProcess, code: Code | None = None) -> dict[str, str]:
    """The consumer's credentials through the environment (never on the command line), the venv first."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLESTORE_")}
    if code is not None and code.tree is not None:  # the driver and (through Spark) the Python workers import it
        env["PYTHONPATH"] = str(code.tree)
    env.update({"TABLESTORE_ENDPOINT": emu.endpoint, "TABLESTORE_INSTANCE": emu.instance,
                "TABLESTORE_ACCESS_KEY_ID": emu.access_key_id, "TABLESTORE_ACCESS_KEY_SECRET": emu.access_key_secret,
                "PATH": bin_dir + os.pathsep + env.get("PATH", ""), "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    return env


def run_phase(emu: EmulatorProcess, phase: str, rows: int, channels: int, work: Path, cutoff: str | None,
              label: str | None = None, code: Code | None = None) -> SparkRun:
    """One ``spark-submit`` of the consumer's ``phase`` with ``code``'s consumer, recorded as ``label`` (default:
    the phase)."""
    code = code or Code()
    name = f"{label or phase}-{code.tunnel}"
    args = ["--table", TABLE, "--tunnel", code.tunnel, "--phase", phase, "--sink", "parquet",
            "--sink-path", str(work / f"changes-{code.tunnel}"), "--summary-file", str(work / f"summary-{name}.json")]
    if cutoff:
        args += ["--cutoff", cutoff]
    return submit(emu, label or phase, rows, channels, work, code.application(), args, code)


def run_job(emu: EmulatorProcess, job: str, rows: int, channels: int, work: Path) -> SparkRun:
    """One ``spark-submit`` of a data-source job (:mod:`benchmarks.scale_spark_jobs`): ``spark.read`` of the
    table or ``readStream`` of :data:`STREAM_TUNNEL`."""
    args = ["--job", "read" if job == "spark.read" else "stream", "--table", TABLE, "--tunnel", STREAM_TUNNEL,
            "--checkpoint", str(work / "stream-checkpoint"), "--summary-file", str(work / f"summary-{job}.json")]
    return submit(emu, job, rows, channels, work, str(JOBS_APP), args, Code(tunnel=STREAM_TUNNEL))


def submit(emu: EmulatorProcess, label: str, rows: int, channels: int, work: Path, application: str,
           args: list[str], code: Code) -> SparkRun:
    """Run ``spark-submit --master local[2] application args`` (whose ``--summary-file`` gets the records),
    sampling its process tree and the emulator."""
    assert emu.process is not None
    events = work / f"events-{label}-{code.tunnel}"
    events.mkdir()
    gc_log = events / "gc.log"
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
           "--driver-java-options", f"-Xlog:gc:file={gc_log}",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.eventLog.enabled=true",
           "--conf", f"spark.eventLog.dir=file://{events}", "--conf", "spark.eventLog.compress=false",
           "--conf", "spark.eventLog.rolling.enabled=false", application, *args]
    emu.control.request_counts(reset=True)
    emu_cpu = process_cpu_s(emu.process.pid)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=consumer_env(emu, code), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    with TreeSampler(proc.pid, classify) as sampler:
        output, _ = proc.communicate(timeout=7200)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed ({proc.returncode}):\n{output[-4000:]}")
    summary = json.loads(Path(args[args.index("--summary-file") + 1]).read_text())
    tasks = sum(line.count('"Event":"SparkListenerTaskEnd"') for log in events.rglob("*") if log.is_file()
                for line in log.read_text().splitlines())
    usage = sampler.usage()
    run = SparkRun(label, rows, channels, summary["records"], summary.get("rounds", summary.get("batches", 0)),
                   tasks, wall, {k: usage.cpu_s.get(k, 0.0) for k in KINDS},
                   {k: usage.peak_rss_mb.get(k, 0.0) for k in KINDS}, summary.get("peak_task_rss_bytes", 0) / 2**20,
                   process_cpu_s(emu.process.pid) - emu_cpu, emu.control.request_counts(), code.label,
                   {k: usage.peak_threads.get(k, 0) for k in KINDS}, heap_after_gc_mb(gc_log))
    print(f"  {label} ({code.label}): {run.records:,} records, {run.rounds} rounds, {run.tasks} tasks, {wall:.1f} s, "
          "CPU "
          + ", ".join(f"{k} {v:.1f}" for k, v in run.cpu_s.items()), flush=True)
    return run


def measure_point(rows: int, channels: int, other: Code | None = None, other_first: bool = False
                  ) -> list[SparkRun]:
    """Both phases (and the start-up run) at one point; with ``other``, its consumer too, on its own tunnel of
    the same table, before or after this tree's in each phase."""
    with scale_point(rows, channels) as point, TableClient(**point.emulator.client_kwargs) as tables, \
            TunnelClient(**point.emulator.client_kwargs) as tunnels, \
            tempfile.TemporaryDirectory(prefix="scale-spark-") as tmp:
        emu = point.emulator
        started = time.monotonic()
        codes = [Code()]
        if other is not None:
            codes.insert(0 if other_first else 1, other)
        for tunnel in [*(code.tunnel for code in codes), STREAM_TUNNEL]:
            tunnels.create_tunnel(TABLE, tunnel, TunnelType.BASE_AND_STREAM)
        changes = write_changes(tables, rows)
        time.sleep(1.0)
        cutoff = datetime.now(UTC).isoformat()
        print(f"  {rows:,} rows at {channels} channels: base load {point.load_s:.0f} s (0: cached), copy and "
              f"stream on {point.copy_s:.1f} s, tunnels + {changes:,} changes {time.monotonic() - started:.0f} s",
              flush=True)
        full = [run_phase(emu, "full", rows, channels, Path(tmp), None, code=code) for code in codes]
        incremental = [run_phase(emu, "incremental", rows, channels, Path(tmp), cutoff, code=code) for code in codes]
        # the same window again: nothing left to read (the run checks the tunnel and stops before Spark starts)
        startup = run_phase(emu, "incremental", rows, channels, Path(tmp), cutoff, label="start-up")
        jobs = [run_job(emu, job, rows, channels, Path(tmp)) for job in PHASES[2:]]
    for f, i in zip(full, incremental, strict=True):
        if f.records != rows or i.records != changes:
            raise RuntimeError(f"{f.code}: records {f.records} + {i.records}, expected {rows} + {changes}")
    if [j.records for j in jobs] != [rows, rows + changes]:
        raise RuntimeError(f"spark.read and readStream: {[j.records for j in jobs]}, expected {rows}, {rows + changes}")
    return [*full, *incremental, startup, *jobs]


def report(runs: list[SparkRun], command: str) -> str:
    lines = [
        "# Scale: Spark (the consumer, spark.read, readStream) against rows and channels",
        "",
        f"Command: `{command}`",
        "",
        "Each point: one emulator process, a table of `rows` rows (int key + 4 small columns) with its stream on, "
        "one BaseAndStream tunnel, `rows` updates (every row once); `channels` is both the stream partitions "
        "and the number of BaseData channels. The consumer runs with `spark-submit --master local[2]` into a "
        "Parquet change log, the full phase then the incremental phase. CPU per 100k records by process "
        "(sampled from /proc every 0.2 s): the JVM (driver and, in local mode, the executors' JVM side), the "
        "driver's Python (the tunnel session, planning, checkpoints) and the executors' Python workers (reading, "
        "decoding, Arrow, Parquet). Tasks from Spark's event log; \"task RSS\" is the Python workers' peak from "
        "the consumer's summary; peak threads: the most each class of process had at once. A third run per "
        "point (`start-up`) repeats the incremental window with nothing "
        "left to read: a `spark-submit` that checks the tunnel and stops before starting Spark. The fixed cost "
        "of a run that does start Spark (its session, the Python workers' start) is in every other row: the "
        "ratios compare totals, and the cost of one more task is the difference of two points over their "
        "difference in tasks. Then the data source, each job a `spark-submit` into Spark's `noop` sink "
        "(`benchmarks/scale_spark_jobs.py`): `spark.read` of the whole table (`count()`; records = rows) and "
        "`readStream` of a third BaseAndStream tunnel with `availableNow` (records = its base data and changes; "
        "\"rounds\" = micro-batches). 2 vCPUs shared by Spark and the emulator.",
        "",
        "| code | phase | rows | channels | records | rounds | Spark tasks | wall s | JVM CPU-s / 100k | driver Python "
        "CPU-s / 100k | executor Python CPU-s / 100k | JVM peak MB | JVM heap after GC MB | driver Python peak MB "
        "| task RSS MB "
        "| peak threads (JVM / driver / workers) "
        "| emulator CPU-s / 100k | ReadRecords / 100k | Heartbeat / s | Checkpoint / 100k | GetCheckpoint / 100k "
        "| GetRange / 100k | row writes / 100k |",
        "|---|---|" + "---:|" * 21,
    ]
    for r in runs:
        lines.append(
            f"| {r.code} | {r.phase} | {r.rows:,} | {r.channels} | {r.records:,} | {r.rounds} | {r.tasks} "
            f"| {r.wall_s:.1f} "
            f"| {r.per_100k(r.cpu_s['jvm']):.2f} | {r.per_100k(r.cpu_s['driver python']):.2f} "
            f"| {r.per_100k(r.cpu_s['executor python']):.2f} | {r.peak_rss_mb['jvm']:.0f} "
            f"| {f'{r.heap_after_gc_mb:.0f}' if r.heap_after_gc_mb else '-'} "
            f"| {r.peak_rss_mb['driver python']:.0f} | {r.task_rss_mb:.0f} "
            f"| {' / '.join(str(r.peak_threads.get(k, '-')) for k in KINDS)} | {r.per_100k(r.emulator_cpu_s):.2f} "
            f"| {r.per_100k(r.requests.get(APIS[0], 0)):.1f} | {r.requests.get(APIS[1], 0) / r.wall_s:.2f} "
            f"| {r.per_100k(r.requests.get(APIS[2], 0)):.1f} | {r.per_100k(r.requests.get(APIS[3], 0)):.1f} "
            f"| {r.per_100k(r.requests.get(APIS[4], 0)):.1f} "
            f"| {r.per_100k(sum(r.requests.get(api, 0) for api in ROW_WRITES)):.1f} |")
    lines += ["", *ratios(runs), ""]
    for chart in sorted(RESULTS.glob("scale-spark-*.png")):
        lines += [f"![{chart.stem}](benchmarks/results/{chart.name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def _total(run: SparkRun) -> float:
    return sum(run.cpu_s.values())


def heap_ratio(small: SparkRun, big: SparkRun) -> str:
    if not (small.heap_after_gc_mb and big.heap_after_gc_mb):
        return ""
    return (f" (its heap after GC {big.heap_after_gc_mb / small.heap_after_gc_mb:.2f}x, "
            f"{small.heap_after_gc_mb:.0f} → {big.heap_after_gc_mb:.0f} MB)")


def ratios(runs: list[SparkRun]) -> list[str]:
    """10x rows (CPU and wall at most 10.5x, memory within 1.2x) and 256 vs 4 channels (CPU per record), for
    each consumer code measured."""
    out = []
    codes = list(dict.fromkeys(r.code for r in runs))
    for code, phase in ((c, p) for c in codes for p in PHASES):
        mine = {(r.rows, r.channels): r for r in runs if r.phase == phase and r.code == code}
        phase_label = phase if len(codes) == 1 else f"{code}, {phase}"
        rows_points = sorted(k for k in mine if k[1] == 16)
        if len(rows_points) >= 2:
            small, big = mine[rows_points[0]], mine[rows_points[-1]]
            task_rss = f", task RSS {big.task_rss_mb / small.task_rss_mb:.2f}x" if small.task_rss_mb else ""
            out.append(f"- {phase_label}, {big.rows / small.rows:.0f}x rows: CPU {_total(big) / _total(small):.2f}x "
                       f"(executors {big.cpu_s['executor python'] / small.cpu_s['executor python']:.2f}x), wall "
                       f"{big.wall_s / small.wall_s:.2f}x{task_rss}, Python workers' peak "
                       f"{big.peak_rss_mb['executor python'] / small.peak_rss_mb['executor python']:.2f}x, "
                       f"JVM peak {big.peak_rss_mb['jvm'] / small.peak_rss_mb['jvm']:.2f}x{heap_ratio(small, big)}.")
        channel_rows = max({r for r, _ in mine}, key=lambda rows: (len({c for r, c in mine if r == rows}), rows))
        by_channels = sorted((k for k in mine if k[0] == channel_rows), key=lambda k: k[1])
        if len(by_channels) >= 2 and by_channels[0][1] != by_channels[-1][1]:
            few, many = mine[by_channels[0]], mine[by_channels[-1]]
            per_record = many.per_100k(_total(many)) / few.per_100k(_total(few))
            extra = many.channels - few.channels
            cost = (f"each further channel cost {1000 * (_total(many) - _total(few)) / extra:.0f} ms of CPU (JVM, "
                    f"driver and executors; executor Python alone "
                    f"{1000 * (many.cpu_s['executor python'] - few.cpu_s['executor python']) / extra:.0f} ms)"
                    if _total(many) > _total(few) else
                    f"no cost per channel shows: the CPU fell from {_total(few):.1f} to {_total(many):.1f} s "
                    f"({few.rounds} → {many.rounds} rounds)")
            out.append(f"- {phase_label}, {few.channels} → {many.channels} channels: CPU per record {per_record:.2f}x, "
                       f"Spark tasks {few.tasks} → {many.tasks}, heartbeats per second "
                       f"{few.requests.get(APIS[1], 0) / few.wall_s:.2f} → "
                       f"{many.requests.get(APIS[1], 0) / many.wall_s:.2f}; {cost}.")
    return out


def charts(runs: list[SparkRun]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    channel_rows = max((r.rows for r in runs if r.channels != 16), default=None)
    for axis in ("rows", "channels"):
        points = [r for r in runs if (r.channels == 16 if axis == "rows" else r.rows == channel_rows)]
        if len({getattr(r, axis) for r in points}) < 2:
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        codes = list(dict.fromkeys(r.code for r in points))
        for code, phase in ((c, p) for c in codes for p in PHASES):
            mine = sorted((r for r in points if r.phase == phase and r.code == code), key=lambda r: getattr(r, axis))
            phase = phase if len(codes) == 1 else f"{code}, {phase}"
            xs = [getattr(r, axis) for r in mine]
            if axis == "rows":
                left.plot(xs, [_total(r) for r in mine], marker="o", label=f"{phase}: CPU-s")
                right.plot(xs, [r.wall_s for r in mine], marker="o", label=f"{phase}: wall s")
                left.set_yscale("log")
                right.set_yscale("log")
            else:
                left.plot(xs, [r.per_100k(_total(r)) for r in mine], marker="o", label=f"{phase}: CPU-s / 100k")
                right.plot(xs, [r.tasks for r in mine], marker="o", label=f"{phase}: Spark tasks")
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel("rows (16 channels)" if axis == "rows" else "channels (rows fixed)")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.suptitle(f"Spark consumer cost against {axis}")
        fig.tight_layout()
        fig.savefig(RESULTS / f"scale-spark-{axis}.png", dpi=80)
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axis", choices=("rows", "channels", "both"), default="both")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every row count")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild the report and charts from the last JSON (keeping the run notes)")
    ap.add_argument("--compare-tree", type=Path, help="also run the consumer of this checkout (see above)")
    ap.add_argument("--compare-label", default="other tree", help="how the report names --compare-tree's rows")
    args = ap.parse_args(argv)
    if args.report_only:
        runs = [SparkRun(**r) for r in json.loads((RESULTS / "scale-spark.json").read_text())]
        old = RESULTS_FILE.read_text()
        command = old.split("Command: `", 1)[1].split("`", 1)[0]
        notes = old[old.index("\nRun notes"):] if "\nRun notes" in old else ""  # written beside the report: kept
        charts(runs)
        RESULTS_FILE.write_text(report(runs, command) + notes)
        return
    points: list[tuple[int, int]] = []
    if args.axis in ("rows", "both"):
        points += ROWS_POINTS
    if args.axis in ("channels", "both"):
        points += CHANNEL_POINTS
    other = Code(args.compare_label, args.compare_tree.resolve(), TUNNEL + "_other") if args.compare_tree else None
    runs = []
    for number, (rows, channels) in enumerate(points):
        rows = int(rows * args.scale)
        print(f"== {rows:,} rows, {channels} channels", flush=True)
        runs += measure_point(rows, channels, other, other_first=number % 2 == 0)
        if not args.no_write:  # kept after every point: a long run stopped midway keeps what it measured
            (RESULTS / "scale-spark.json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    command = "python -m benchmarks.bench_scale_spark " + " ".join(sys.argv[1:])
    if not args.no_write:
        charts(runs)
    text = report(runs, command)
    print(text)
    if not args.no_write:
        RESULTS_FILE.write_text(text)


if __name__ == "__main__":
    main()
