"""A tunnel's snapshot is dropped in the background when its base data is done, and one a crash left behind
is dropped at the next start."""

from __future__ import annotations

import time
from pathlib import Path

from testing.emulator_tunnel import Env, SimWorker, put


def _eventually_no_snapshots(env: Env, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while env.store.snapshots.ids():
        assert time.monotonic() < deadline, f"snapshots left: {env.store.snapshots.ids()}"
        time.sleep(0.05)


def test_the_snapshot_goes_when_the_base_data_is_done(env: Env) -> None:
    table = env.create_table()
    for pk in range(30):
        put(env.store, table, pk, "v")
    tid = env.tunnel.create(table, "base", 1)
    assert len(env.store.snapshots.ids()) == 1
    worker = SimWorker(env.tunnel, tid, "w")
    for _ in range(10):
        worker.beat()
        worker.work()
    assert sum(len(r) for r in worker.records.values()) == 30
    _eventually_no_snapshots(env)


def test_a_snapshot_no_tunnel_refers_to_is_dropped_at_start(tmp_path: Path) -> None:
    env = Env(tmp_path)
    try:
        table = env.create_table()
        put(env.store, table, 1, "v")
        env.store.snapshots.create(table)  # as a crash between taking a snapshot and recording its tunnel leaves
        env.tunnel.create(table, "kept", 1)  # a tunnel's own snapshot stays
        assert len(env.store.snapshots.ids()) == 2
        env.restart()
        deadline = time.monotonic() + 30
        while len(env.store.snapshots.ids()) != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        env.store.close()
