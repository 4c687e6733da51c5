"""Run every benchmark (``make bench``), then rebuild BENCHMARKS.md from ``benchmarks/results/*.md``.

Each ``benchmarks/bench_*.py`` module writes its own results file with the numbers of its run and the command
that reproduces it; ``--only NAME`` runs a subset. Machines are noisy: every benchmark prints ratios against a
baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

# Order matters only for readability of BENCHMARKS.md.
SECTIONS = [
    ("plainbuffer", "PlainBuffer codec"),
    ("table-client", "Table client"),
    ("emulator", "Emulator table API"),
    ("emulator-tunnel", "Emulator tunnel reads"),
    ("tunnel_worker", "TunnelWorker"),
    ("worker_cpu", "TunnelWorker CPU per record"),
    ("scale", "Scale: the TunnelWorker and the StreamWorker against rows and channels"),
    ("scale-spark", "Scale: Spark (the consumer, spark.read, readStream) against rows and channels"),
    ("scale-tunnels", "Scale: a triggerer watching many tunnels"),
    ("stream_worker", "StreamWorker"),
    ("spark", "Spark consumer"),
    ("spark-arrow", "Spark consumer: Arrow buffers in C"),
    ("datasource", "Spark data source"),
    ("stream", "Spark streaming source"),
    ("stream_floor", "Spark streaming source: the floor"),
    ("stream-planner", "Spark streaming source: the planner against channels"),
    ("spark-fencing", "Spark consumer before/after fencing"),
    ("spark-fencing-sink", "Tablestore sink fence cost"),
    ("memory", "Spark consumer memory"),
    ("airflow-sensor", "Airflow sensor and trigger"),
    ("ui", "The Tablestore page in Airflow's UI"),
    ("structure", "Restructuring before/after"),
    ("subpackages", "Subpackages and composition before/after"),
    ("codec", "One codec before/after"),
]


def build_report() -> str:
    parts = [
        "# Benchmarks\n",
        "Every number below was produced by a script in `benchmarks/` on the project's 2-core machine; each",
        "section names the command that reproduces it. Benchmarks print ratios against a baseline measured in",
        "the same run, because absolute numbers on a shared machine are noisy. `make bench` reruns them all and",
        "rebuilds this file (`python -m benchmarks.run_all --report-only` only rebuilds it).\n",
    ]
    seen: set[str] = set()
    for stem, _title in SECTIONS:
        path = RESULTS / f"{stem}.md"
        if path.exists():
            seen.add(path.name)
            parts.append(_demote(path.read_text()))
    for path in sorted(RESULTS.glob("*.md")):
        if path.name not in seen:
            parts.append(_demote(path.read_text()))
    return "\n".join(parts).rstrip() + "\n"


def _demote(markdown: str) -> str:
    """Nest each results file one heading level deeper under the report's title."""
    lines = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            line = "#" + line
        lines.append(line)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", action="append", default=[], help="run only bench_<NAME> (repeatable)")
    parser.add_argument("--report-only", action="store_true", help="only rebuild BENCHMARKS.md")
    args = parser.parse_args()
    failures = []
    if not args.report_only:
        modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
        if args.only:
            modules = [m for m in modules if m.removeprefix("bench_") in args.only]
        for module in modules:
            print(f"== {module}", flush=True)
            started = time.monotonic()
            result = subprocess.run([sys.executable, "-m", f"benchmarks.{module}"], cwd=ROOT)
            print(f"== {module}: exit {result.returncode} in {time.monotonic() - started:.0f} s", flush=True)
            if result.returncode != 0:
                failures.append(module)
    (ROOT / "BENCHMARKS.md").write_text(build_report())
    print("wrote BENCHMARKS.md")
    if failures:
        print("failed: " + ", ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
