"""One TunnelWorker consumes a BaseAndStream tunnel; replaying its records rebuilds the source exactly."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_tablestore.client.epoch import to_ns
from airflow_tablestore.client.model import CellOp, Column, TunnelStage, TunnelType
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.processor import CallbackProcessor
from airflow_tablestore.client.tunnel.worker import TunnelWorker

from .helpers import RecordingProcessor, fast_config, full_scan, table_schema

BASE_MS = 1_700_000_000_000


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 90.0,
             workers: Iterable[TunnelWorker] = ()) -> None:
    """Poll ``predicate`` until true; fail with ``what`` after a generous bound (not a timing assertion).
    Fails at once when one of ``workers`` stopped on a fatal error."""
    deadline = time.monotonic() + timeout_s
    workers = list(workers)
    while time.monotonic() < deadline:
        if predicate():
            return
        for worker in workers:
            if worker.error is not None:
                raise AssertionError(f"worker failed while waiting for {what}: {worker.error}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def load_base_rows(tables: Any, table: str, count: int) -> None:
    """Rows with every value type and two versions of one column."""
    for i in range(count):
        pk = (("pk", f"k{i % 7}"), ("n", i))
        tables.put_row(table, pk, [
            Column("s", f"str-{i}", BASE_MS + i),
            Column("i", i * 1000, BASE_MS + i),
            Column("d", i / 3.0, BASE_MS + i),
            Column("b", i % 2 == 0, BASE_MS + i),
            Column("bin", bytes([i % 256, 0, 255]), BASE_MS + i),
            Column("multi", "old", BASE_MS + i),
            Column("multi", "new", BASE_MS + i + 1),
        ])


def mutate(tables: Any, table: str, count: int) -> None:
    """Stream-phase changes: new rows, multi-version updates, column deletes, row deletes."""
    for i in range(count, count + 20):
        tables.put_row(table, (("pk", "new"), ("n", i)), [Column("s", f"fresh-{i}", BASE_MS + 10_000 + i)])
    for i in range(0, count, 3):
        pk = (("pk", f"k{i % 7}"), ("n", i))
        tables.update_row(table, pk, [
            Column("multi", "newer", BASE_MS + 20_000 + i),
            Column("i", -i, BASE_MS + 20_000 + i),
            Column("s", op=CellOp.DELETE_ALL_VERSIONS),
        ])
    for i in range(1, count, 5):
        pk = (("pk", f"k{i % 7}"), ("n", i))
        tables.update_row(table, pk, [Column("multi", None, BASE_MS + i, CellOp.DELETE_ONE_VERSION)])
    for i in range(2, count, 11):
        tables.delete_row(table, (("pk", f"k{i % 7}"), ("n", i)))
    tables.put_row(table, (("pk", "k0"), ("n", 0)), [Column("only", "replaced", BASE_MS + 30_000)])


def test_base_and_stream_replication_is_exact(
    tablestore_client: Any,
    tablestore_tunnel_client: TunnelClient,
    unique_table: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, replica = f"{unique_table}src", f"{unique_table}dst"
    tablestore_client.create_table(table_schema(source))
    tablestore_client.create_table(table_schema(replica, stream=False))
    load_base_rows(tablestore_client, source, 90)  # 3 base channels of 40 rows
    tunnel_id = tablestore_tunnel_client.create_tunnel(source, "copy", TunnelType.BASE_AND_STREAM)
    mutate(tablestore_client, source, 90)
    cutoff_ns = to_ns(datetime.now(UTC))

    processor = RecordingProcessor(tablestore_client, replica)
    caplog.set_level(logging.INFO, logger="airflow_tablestore.client.tunnel")
    worker = TunnelWorker(tablestore_tunnel_client, tunnel_id, processor,
                          fast_config(progress_log_interval_s=0.5, max_channel_parallel=2))
    with worker:
        wait_for(
            lambda: (
                tablestore_tunnel_client.describe_tunnel(source, "copy").tunnel.stage
                is TunnelStage.PROCESS_STREAM
            ),
            "the base phase to finish",
        )
        wait_for(
            lambda: tablestore_tunnel_client.describe_tunnel(source, "copy").consume_point_ns > cutoff_ns,
            "the consume point to pass the cutoff",
        )
        assert worker.error is None
    assert not worker.is_alive()
    metrics = worker.metrics  # after the stop: a snapshot taken mid-batch can lag the processor's list

    assert full_scan(tablestore_client, replica) == full_scan(tablestore_client, source)
    base_records = [r for r in processor.records if r.sequence is None]
    assert len({r.primary_key for r in base_records}) == 90
    assert metrics.records_processed >= len(processor.records) > 90
    assert metrics.checkpoints > 0 and metrics.bytes_read > 0
    assert metrics.lag_s is not None
    assert any("records" in m and "channels" in m for m in caplog.messages)  # progress line
    desc = tablestore_tunnel_client.describe_tunnel(source, "copy")
    assert all(c.client_id is None for c in desc.channels)  # graceful shutdown released everything


def test_factory_gets_one_processor_per_channel_and_shutdowns(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, unique_table: str
) -> None:
    table = f"{unique_table}f"
    tablestore_client.create_table(table_schema(table))
    load_base_rows(tablestore_client, table, 85)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "f", TunnelType.BASE_DATA)
    made: list[str] = []
    closed: list[str] = []
    seen: list[Any] = []

    def factory(ctx: Any) -> CallbackProcessor:
        assert ctx.channel_type == "BaseData" and ctx.tunnel_id == tunnel_id
        made.append(ctx.channel_id)
        return CallbackProcessor(lambda records, c: seen.extend(records),
                                 on_shutdown=lambda: closed.append(ctx.channel_id))

    with TunnelWorker(tablestore_tunnel_client, tunnel_id, factory, fast_config()):
        wait_for(
            lambda: all(
                c.status.value == "TERMINATED"
                for c in tablestore_tunnel_client.describe_tunnel(table, "f").channels
            ),
            "base channels",
        )
    assert len(set(made)) == 3 and sorted(closed) == sorted(made)
    assert len({r.primary_key for r in seen}) == 85


def test_max_channel_parallel_bounds_concurrent_processing(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, unique_table: str
) -> None:
    table = f"{unique_table}m"
    tablestore_client.create_table(table_schema(table))
    load_base_rows(tablestore_client, table, 100)  # 3 base channels, 4 reads each
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "m", TunnelType.BASE_DATA)
    lock = threading.Lock()
    active = peak = 0
    keys: set[Any] = set()

    def slow(records: list[Any], ctx: Any) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)  # long enough for the other channels' batches to be ready meanwhile
        with lock:
            active -= 1
            keys.update(r.primary_key for r in records)

    with TunnelWorker(
        tablestore_tunnel_client, tunnel_id, CallbackProcessor(slow), fast_config(max_channel_parallel=1)
    ):
        wait_for(lambda: len(keys) == 100, "all rows")
    assert peak == 1


def test_threads_and_buffered_answers_are_bounded_by_the_pools_not_the_channels(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, unique_table: str
) -> None:
    table = f"{unique_table}p"
    tablestore_client.create_table(table_schema(table))
    load_base_rows(tablestore_client, table, 400)  # 12 base channels
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "p", TunnelType.BASE_DATA)
    keys: set[Any] = set()
    lock = threading.Lock()

    def record(records: list[Any], ctx: Any) -> None:
        time.sleep(0.01)  # batches pile up if nothing bounds them
        with lock:
            keys.update(r.primary_key for r in records)

    readers = processors = held = 0
    worker = TunnelWorker(tablestore_tunnel_client, tunnel_id, CallbackProcessor(record),
                          fast_config(max_channel_parallel=2, read_threads=2, max_buffered_answers=3))
    with worker:
        deadline = time.monotonic() + 120
        while len(keys) < 400 and time.monotonic() < deadline and worker.error is None:
            names = [t.name for t in threading.enumerate()]
            readers = max(readers, sum(n.startswith("tunnel-reader-") for n in names))
            processors = max(processors, sum(n.startswith("tunnel-channel-") for n in names))
            if worker._pools is not None:  # made when the worker's thread starts
                held = max(held, worker._pools.held)
            time.sleep(0.005)
    assert len(keys) == 400, worker.error
    assert len(tablestore_tunnel_client.describe_tunnel(table, "p").channels) >= 10
    assert 1 <= readers <= 2 and 1 <= processors <= 2 and 1 <= held <= 3


@pytest.mark.parametrize("read_ahead", [0, 2])
def test_any_read_ahead_drains_every_channel(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, unique_table: str, read_ahead: int
) -> None:
    table = f"{unique_table}r{read_ahead}"
    tablestore_client.create_table(table_schema(table))
    load_base_rows(tablestore_client, table, 85)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "r", TunnelType.BASE_DATA)
    keys: set[Any] = set()
    lock = threading.Lock()

    def record(records: list[Any], ctx: Any) -> None:
        with lock:
            keys.update(r.primary_key for r in records)

    with TunnelWorker(tablestore_tunnel_client, tunnel_id, CallbackProcessor(record),
                      fast_config(read_ahead=read_ahead, max_buffered_answers=2)) as worker:
        wait_for(lambda: len(keys) == 85, "all rows", workers=[worker])
        wait_for(lambda: all(c.status.value == "TERMINATED"
                             for c in tablestore_tunnel_client.describe_tunnel(table, "r").channels),
                 "base channels", workers=[worker])


def test_shutdown_waits_for_each_channels_processor_to_shut_down(
    tablestore_tunnel_client: TunnelClient, tablestore_client: Any, unique_table: str
) -> None:
    table = f"{unique_table}s"
    tablestore_client.create_table(table_schema(table))
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "s", TunnelType.STREAM)
    made: list[str] = []
    closed: list[str] = []
    seen: list[Any] = []

    def slow_shutdown(channel_id: str) -> None:
        time.sleep(0.5)  # a sink's flush: the worker's shutdown must wait for it
        closed.append(channel_id)

    def factory(ctx: Any) -> CallbackProcessor:
        made.append(ctx.channel_id)
        return CallbackProcessor(lambda records, c: seen.extend(records),
                                 on_shutdown=lambda: slow_shutdown(ctx.channel_id))

    with TunnelWorker(tablestore_tunnel_client, tunnel_id, factory, fast_config()) as worker:
        wait_for(lambda: len(made) == 2, "both stream channels", workers=[worker])
        load_base_rows(tablestore_client, table, 10)
        wait_for(lambda: len(seen) >= 10, "the changes", workers=[worker])
    assert sorted(closed) == sorted(made)
