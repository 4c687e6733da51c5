"""Stream-worker test helpers: source/replica tables, a random writer, an order-checking replicating sink.

Also runnable as a script — a StreamWorker in its own process that replicates into a table, so that tests can
SIGKILL it: ``python replica.py ENDPOINT SOURCE REPLICA STATUS_TABLE WORKER_ID``.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from replication_helpers import apply_records  # as a script: the caller puts tests/ on PYTHONPATH

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    MAX_TIME_DEVIATION,
    CellOp,
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    StreamSpec,
    TableOptions,
    TableSchema,
)
from airflow_tablestore.client.stream.config import StreamWorkerConfig
from airflow_tablestore.client.stream.processor import (
    Checkpointer,
    RecordProcessor,
    ShardInfo,
    ShutdownReason,
)
from airflow_tablestore.client.table.client import TableClient

KEYS = [f"k{i:02d}" for i in range(40)]
PK = (PrimaryKeyColumn("k", PrimaryKeyType.STRING),)


def schema(name: str, *, stream: bool) -> TableSchema:
    return TableSchema(name, PK, options=TableOptions(max_versions=1, max_time_deviation=MAX_TIME_DEVIATION),
                       stream=StreamSpec(True, 24) if stream else None)


def fast_config(status_table: str, worker_id: str, **overrides: Any) -> StreamWorkerConfig:
    """Short intervals so tests finish in seconds against the emulator."""
    settings: dict[str, Any] = {
        "status_table": status_table,
        "worker_id": worker_id,
        "lease_duration_s": 1.5,
        "renew_interval_s": 0.2,
        "shard_sync_interval_s": 0.3,
        "idle_poll_s": 0.05,
        "fetch_limit": 40,
        "processor_retry_s": (0.05, 0.2),
        "max_parallel_shards": 4,
    }
    settings.update(overrides)
    return StreamWorkerConfig(**settings)


def scan(client: TableClient, table: str) -> list[tuple[Any, ...]]:
    rows = client.iter_range(table, [("k", INF_MIN)], [("k", INF_MAX)])
    return [
        (row.primary_key, sorted((c.name, c.timestamp, repr(c.value)) for c in row.columns)) for row in rows
    ]


def stream_contents(client: TableClient, table: str) -> set[tuple[Any, tuple[int, int]]]:
    """Every retained record of the table's stream as ``(primary key, (timestamp, row_index))``."""
    from airflow_tablestore.client.stream.client import StreamClient

    streams = StreamClient(transport=client.transport)
    sid = streams.stream_id_of(table)
    assert sid is not None
    out: set[tuple[Any, tuple[int, int]]] = set()
    for shard in streams.describe_stream(sid).shards:
        it: str | None = streams.get_shard_iterator(sid, shard.shard_id)
        while it is not None:
            result = streams.get_stream_records(it)
            for rec in result.records:
                assert rec.sequence is not None
                out.add((rec.primary_key, (rec.sequence.timestamp, rec.sequence.row_index)))
            if not result.records:
                break
            it = result.next_iterator
    return out


class Writer:
    """Random puts/updates/deletes on :data:`KEYS` from a background thread until stopped."""

    def __init__(self, client: TableClient, table: str, seed: int = 7) -> None:
        self.client, self.table = client, table
        self.rng = random.Random(seed)
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def write_one(self) -> None:
        key, n, op = [("k", self.rng.choice(KEYS))], self.count, self.rng.random()
        if op < 0.6:
            self.client.put_row(self.table, key, {"a": n, "b": f"v{n}"})
        elif op < 0.9:
            self.client.update_row(
                self.table, key, [Column("a", n * 10), Column("b", op=CellOp.DELETE_ALL_VERSIONS)]
            )
        else:
            self.client.delete_row(self.table, key)
        self.count += 1

    def write(self, count: int) -> Writer:
        """``count`` writes from the calling thread."""
        for _ in range(count):
            self.write_one()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.write_one()
            self._stop.wait(0.005)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the thread (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class Sink:
    """Collects deliveries from every worker (thread-safe), applies them to a replica, checks per-key order.

    A record seen before is a re-delivery (allowed: at least once). A *new* record older than the newest
    record already delivered for its key is an order violation.
    """

    def __init__(self, client: TableClient | None = None, replica: str | None = None) -> None:
        self.client, self.replica = client, replica
        self.lock = threading.Lock()
        self.log: list[tuple[str, Any, tuple[int, int]]] = []  # (shard, key, seq) in delivery order
        self.seen: set[tuple[Any, tuple[int, int]]] = set()
        self.newest: dict[Any, tuple[int, int]] = {}
        self.violations: list[str] = []
        self.redelivered = 0
        self.fail_first: set[str] = set()  # shard ids whose first batch raises once
        self.failed: set[str] = set()
        self.shutdowns: dict[str, list[ShutdownReason]] = defaultdict(list)
        self.by_record = False  # checkpoint(last record) instead of checkpoint(); none at REQUESTED
        self.initialized: set[str] = set()  # shards whose processor was initialized

    def deliver(self, shard: str, records: list[Record]) -> None:
        with self.lock:
            if shard in self.fail_first and shard not in self.failed:
                self.failed.add(shard)
                raise RuntimeError(f"injected failure on the first batch of {shard}")
            if self.client is not None and self.replica is not None:
                apply_records(self.client, self.replica, records)
            for rec in records:
                assert rec.sequence is not None
                seq = (rec.sequence.timestamp, rec.sequence.row_index)
                key = rec.primary_key
                self.log.append((shard, key, seq))
                if (key, seq) in self.seen:
                    self.redelivered += 1
                    continue
                if key in self.newest and seq < self.newest[key]:
                    self.violations.append(f"{key}: {seq} after {self.newest[key]} (shard {shard})")
                self.seen.add((key, seq))
                self.newest[key] = max(seq, self.newest.get(key, seq))

    def processor(self, shard: ShardInfo) -> SinkProcessor:
        return SinkProcessor(self, shard)


class SinkProcessor(RecordProcessor):
    """Delivers to a :class:`Sink`, checkpoints after every batch and at TERMINATE."""

    def __init__(self, sink: Sink, shard: ShardInfo) -> None:
        self.sink, self.shard = sink, shard

    def initialize(self, shard: ShardInfo) -> None:
        with self.sink.lock:
            self.sink.initialized.add(shard.shard_id)

    def process_records(self, records: list[Record], checkpointer: Checkpointer) -> None:
        self.sink.deliver(self.shard.shard_id, records)
        checkpointer.checkpoint(records[-1] if self.sink.by_record else None)

    def shutdown(self, reason: ShutdownReason, checkpointer: Checkpointer) -> None:
        with self.sink.lock:
            self.sink.shutdowns[self.shard.shard_id].append(reason)
        if reason is ShutdownReason.TERMINATE or (
            reason is ShutdownReason.REQUESTED and not self.sink.by_record
        ):
            checkpointer.checkpoint()


def _main(argv: list[str]) -> None:
    from airflow_tablestore.client.stream.worker import StreamWorker

    endpoint, source, replica, status, worker_id = argv
    client = TableClient(endpoint, "emulator-access-key-id", "emulator-access-key-secret", "emulator")
    sink = Sink(client, replica)
    worker = StreamWorker(client, source, sink.processor, fast_config(status, worker_id))
    worker.start()
    print("started", flush=True)
    worker.join()


if __name__ == "__main__":
    _main(sys.argv[1:])


def wait_until(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll ``check`` until truthy; fail with ``what`` after ``timeout`` seconds (no timing assertions)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
