"""Time the TunnelWorker draining a fresh 200,000-row BaseData tunnel: the cold run ``bench_spark`` reports.

Used by ``compare_worker_revisions.sh``: the client comes from the revision on ``PYTHONPATH``, the emulator
from ``EMULATOR_TREE`` (default: the same), so client code is compared against one server. Prints the
records/s of ``--runs`` consecutive drains, each on a new tunnel.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from airflow_tablestore.client import TableClient, TunnelClient  # the public API: any revision has it
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.bench_spark import load, new_tunnel, run_worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="worker-cold-"))
    (work / "emu").mkdir()
    if os.environ.get("EMULATOR_TREE"):  # the emulator process inherits PYTHONPATH
        os.environ["PYTHONPATH"] = os.environ["EMULATOR_TREE"]
    with EmulatorProcess(data_dir=work / "emu",
                         extra_args=["--base-channel-rows", "20000", "--log-level", "WARNING"]) as emu:
        tables, tunnels = TableClient(**emu.client_kwargs), TunnelClient(**emu.client_kwargs)
        load(tables, args.rows)
        rates = [args.rows / run_worker(tunnels, new_tunnel(tunnels, f"w{i}"), args.rows, None)
                 for i in range(args.runs)]
    print("TunnelWorker drain, records/s:", " ".join(f"{r:,.0f}" for r in rates))


if __name__ == "__main__":
    main()
