"""StreamWorker end to end: balancing across 2 then 3 workers under writes, a split mid-consumption, a killed
worker's shards taken over, and an exact replica with per-key order never violated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.client.stream.lease import SHARD_END, LeaseManager
from airflow_tablestore.client.stream.worker import StreamWorker
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess

from .replica import Sink, Writer, fast_config, scan, schema, wait_until

REPLICA_SCRIPT = Path(__file__).with_name("replica.py")


def _owners(leases: LeaseManager, stream_id: str) -> Counter[str]:
    return Counter(lease.owner for lease in leases.list(stream_id) if not lease.finished and lease.owner)


def _spread(leases: LeaseManager, stream_id: str, workers: int) -> bool:
    counts = _owners(leases, stream_id)
    active = sum(1 for lease in leases.list(stream_id) if not lease.finished)
    return (len(counts) == workers and sum(counts.values()) == active
            and max(counts.values()) - min(counts.values()) <= 1)


def _caught_up(client: TableClient, source: str, replica: str) -> bool:
    return scan(client, source) == scan(client, replica)


@pytest.mark.slow
def test_two_then_three_workers_split_and_exact_replica(
    tablestore_emulator: EmulatorProcess, tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    source, replica, status = names("src"), names("dst"), names("status")
    tablestore_client.create_table(schema(source, stream=True))
    tablestore_client.create_table(schema(replica, stream=False))
    writer_client = TableClient(**tablestore_emulator.client_kwargs)
    writer = Writer(writer_client, source).start()
    sink = Sink(tablestore_client, replica)
    leases = LeaseManager(tablestore_client, status)
    workers = [
        StreamWorker(tablestore_client, source, sink.processor, fast_config(status, w)) for w in ("w1", "w2")
    ]
    try:
        for w in workers:
            w.start()
        sid = workers[0].stream_id
        assert sid is not None
        wait_until(lambda: _spread(leases, sid, 2), what="6 shards spread 3/3 over two workers")
        assert sorted(_owners(leases, sid).values()) == [3, 3]
        workers.append(
            StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "w3")).start()
        )
        wait_until(lambda: _spread(leases, sid, 3), what="6 shards spread 2/2/2 over three workers")
        assert sorted(_owners(leases, sid).values()) == [2, 2, 2]
        # split a shard that already delivered records, while writes go on
        parent = wait_until(lambda: next((s for s, _, _ in sink.log), None), what="first delivery")
        children = [c["partition_id"] for c in tablestore_emulator.control.split_partition(source, parent)]
        wait_until(lambda: all(any(s == c for s, _, _ in sink.log) for c in children), timeout=90,
                   what="both children of the split delivering")
        wait_until(lambda: writer.count >= 150, what="150 writes")
        writer.stop()
        wait_until(
            lambda: _caught_up(tablestore_client, source, replica), timeout=90, what="replica == source"
        )
    finally:
        writer.stop()
        for w in workers:
            w.shutdown()
        writer_client.close()
    assert scan(tablestore_client, source) == scan(tablestore_client, replica)
    assert sink.violations == []
    # the parent's last record was delivered before the first record of each child
    positions = {
        shard: [i for i, (s, _, _) in enumerate(sink.log) if s == shard] for shard in [parent, *children]
    }
    assert positions[parent] and all(
        positions[c] and max(positions[parent]) < min(positions[c]) for c in children
    )
    rows = {lease.shard_id: lease for lease in leases.list(sid)}
    assert rows[parent].checkpoint == SHARD_END
    assert all(rows[c].parent_shard_ids == (parent,) for c in children)
    # clean shutdown released every lease
    assert all(lease.owner == "" for lease in rows.values())
    assert all(w.metrics.leases_lost == 0 for w in workers)
    assert workers[2].metrics.leases_stolen >= 2  # the third worker got its share through LeaseStealer


@pytest.mark.slow
def test_killed_worker_is_taken_over(tablestore_emulator: EmulatorProcess, tablestore_client: TableClient,
                                     names: Callable[[str], str]) -> None:
    source, replica, status = names("src"), names("dst"), names("status")
    tablestore_client.create_table(schema(source, stream=True))
    tablestore_client.create_table(schema(replica, stream=False))
    writer_client = TableClient(**tablestore_emulator.client_kwargs)
    writer = Writer(writer_client, source, seed=11).start()  # continuous writes throughout
    leases = LeaseManager(tablestore_client, status)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPLICA_SCRIPT),
            tablestore_emulator.endpoint,
            source,
            replica,
            status,
            "victim",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                filter(
                    None,
                    [
                        str(REPLICA_SCRIPT.parents[3]),
                        str(REPLICA_SCRIPT.parents[2]),
                        os.environ.get("PYTHONPATH"),
                    ],
                )
            ),
        },
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"started"
        sid = StreamClient(transport=tablestore_client.transport).stream_id_of(source)
        assert sid is not None
        wait_until(lambda: _owners(leases, sid) == Counter({"victim": 6}), what="victim owning all shards")
        wait_until(lambda: scan(tablestore_client, replica), what="victim replicating")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert _owners(leases, sid) == Counter({"victim": 6})  # nobody released anything
    sink = Sink(tablestore_client, replica)
    survivor = StreamWorker(
        tablestore_client, source, sink.processor, fast_config(status, "survivor")
    ).start()
    try:
        wait_until(lambda: _owners(leases, sid) == Counter({"survivor": 6}), what="survivor taking over")
        written = writer.count
        wait_until(lambda: writer.count >= written + 50, what="50 more writes after the takeover")
        writer.stop()
        wait_until(
            lambda: _caught_up(tablestore_client, source, replica), what="replica == source after takeover"
        )
    finally:
        writer.stop()
        survivor.shutdown()
        writer_client.close()
    assert survivor.metrics.leases_taken == 6
    assert sink.violations == []
    assert scan(tablestore_client, source) == scan(tablestore_client, replica)
