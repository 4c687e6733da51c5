"""Cost of one consume-point check on the Airflow layer, against a local emulator (same-run baselines).

Run: ``.venv/bin/python -m benchmarks.bench_airflow_sensor [--checks 300] [--concurrent 50]``

One emulator, one stream table with a Stream tunnel (4 channels). Timed, in this order:

* baseline: raw ``TunnelClient.describe_tunnel`` per check, sequential;
* ``TablestoreTunnelHook.check_consume_point`` (sensor poke path: describe + rule), sequential;
* ``acheck_consume_point`` awaited one after another (trigger path: ``asyncio.to_thread`` per call);
* ``--concurrent`` triggers polling once each in one event loop (a triggerer with many deferred sensors), with
  ``--latency`` injected per DescribeTunnel by the emulator: baseline = blocking client calls inside the
  loop; vs the trigger's ``asyncio.to_thread`` path; plus the largest event-loop stall seen by a 1 ms ticker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable

from airflow_tablestore.client.model import (
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableSchema,
    TunnelType,
)
from airflow_tablestore.emulator.testing import EmulatorProcess


def _timed(label: str, checks: int, fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - started
    print(f"{label:<48} {elapsed:8.3f} s  {elapsed / checks * 1000:8.2f} ms/check")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05, help="injected DescribeTunnel latency (s)")
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="bench-airflow-home-")
    os.environ.setdefault("AIRFLOW_HOME", home)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient
    from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

    with EmulatorProcess() as emu:
        os.environ["AIRFLOW_CONN_TABLESTORE_BENCH"] = emu.airflow_connection_json()
        table = TableClient(**emu.client_kwargs)
        table.create_table(TableSchema(
            name="bench", primary_key=(PrimaryKeyColumn("id", PrimaryKeyType.STRING),),
            stream=StreamSpec(enabled=True),
        ))
        raw = TunnelClient(**emu.client_kwargs)
        raw.create_tunnel("bench", "tn", TunnelType.STREAM)
        hook = TablestoreTunnelHook("tablestore_bench")
        hook.get_config()
        n = args.checks

        base = _timed("baseline: TunnelClient.describe_tunnel", n,
                      lambda: [raw.describe_tunnel("bench", "tn") for _ in range(n)])
        sync = _timed("hook.check_consume_point (poke path)", n,
                      lambda: [hook.check_consume_point("bench", "tn", 1) for _ in range(n)])

        async def sequential(hooks_: list[TablestoreTunnelHook], count: int) -> None:
            for i in range(count):
                await hooks_[i % len(hooks_)].acheck_consume_point("bench", "tn", 1)

        seq = _timed("acheck_consume_point, sequential (trigger path)", n,
                     lambda: asyncio.run(sequential([hook], n)))

        # Many deferred sensors in one triggerer, over a network with LATENCY_S per DescribeTunnel (injected
        # by the emulator). One warmed-up hook per trigger (config parsed, HTTP connection open).
        c = args.concurrent
        hooks = [TablestoreTunnelHook("tablestore_bench") for _ in range(c)]
        for h in hooks:
            h.check_consume_point("bench", "tn", 1)

        def with_latency(fn: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                emu.control.add_fault("/tunnel/describe", code=None, delay_s=args.latency, count=c)
                fn()
                emu.control.clear_faults()
            return run

        async def max_lag(checks: Callable[[], Awaitable[None]]) -> float:
            """Run ``checks`` while a 1 ms ticker measures the largest event-loop stall."""
            lag, stop = 0.0, False

            async def ticker() -> None:
                nonlocal lag
                while not stop:
                    before = time.perf_counter()
                    await asyncio.sleep(0.001)
                    lag = max(lag, time.perf_counter() - before - 0.001)

            task = asyncio.create_task(ticker())
            await asyncio.sleep(0.01)
            await checks()
            stop = True
            await task
            return lag

        async def blocking_checks() -> None:  # a trigger calling the client directly (the anti-pattern)
            for h in hooks:
                h.check_consume_point("bench", "tn", 1)
                await asyncio.sleep(0)

        async def threaded_checks() -> None:  # the trigger's path: asyncio.to_thread per poll
            results = await asyncio.gather(*(h.acheck_consume_point("bench", "tn", 1) for h in hooks))
            assert all(r.done for r in results)

        lags: dict[str, float] = {}

        def measure(name: str, checks: Callable[[], Awaitable[None]]) -> Callable[[], None]:
            def run() -> None:
                lags[name] = asyncio.run(max_lag(checks))
            return with_latency(run)

        label = f"{c} polls, {args.latency * 1000:.0f} ms latency"
        blocking = _timed(f"{label}: blocking calls in the loop", c, measure("blocking", blocking_checks))
        threaded = _timed(f"{label}: asyncio.to_thread + gather", c, measure("threaded", threaded_checks))
        print(f"max event-loop stall: blocking {lags['blocking'] * 1000:.1f} ms, "
              f"to_thread {lags['threaded'] * 1000:.1f} ms")
        summary = {
            "checks": n,
            "poke_vs_raw": round(sync / base, 2),
            "async_vs_raw": round(seq / base, 2),
            "to_thread_speedup_vs_blocking": round(blocking / threaded, 2),
            "max_stall_ms_blocking": round(lags["blocking"] * 1000, 1),
            "max_stall_ms_to_thread": round(lags["threaded"] * 1000, 1),
        }
        print(json.dumps(summary))
        for h in (hook, *hooks):
            h.close()
        raw.close()
        table.close()


if __name__ == "__main__":
    main()
