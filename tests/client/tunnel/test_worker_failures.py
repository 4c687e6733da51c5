"""Failures: a processor that raises, a partition split, an expired tunnel, an emulator restart."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from airflow_tablestore.client.errors import InvalidParameterError
from airflow_tablestore.client.model import ChannelStatus, Column, Record, TunnelStage, TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.processor import ChannelContext
from airflow_tablestore.client.tunnel.worker import TunnelWorker, TunnelWorkerError
from airflow_tablestore.emulator.testing import EmulatorProcess

from .helpers import EMULATOR_ARGS, RecordingProcessor, fast_config, full_scan, table_schema
from .test_worker_replication import BASE_MS, load_base_rows, mutate, wait_for


@pytest.fixture()
def own_emulator(tmp_path: Any) -> Iterator[EmulatorProcess]:
    with EmulatorProcess(data_dir=tmp_path, extra_args=EMULATOR_ARGS) as emu:
        yield emu


def _n(rec: Record) -> int:
    return rec.primary_key[1][1]  # type: ignore[return-value]


def _put(tablestore_client: Any, table: str, key: str, numbers: Iterable[int]) -> None:
    """One row per ``n`` in ``numbers``: primary key (``key.format(n)``, n), column v = n."""
    for i in numbers:
        tablestore_client.put_row(table, (("pk", key.format(i)), ("n", i)), [Column("v", i, BASE_MS)])


def _stream_tunnel(
    tablestore_client: Any, tablestore_tunnel_client: TunnelClient, table: str, name: str
) -> str:
    """A new table with a STREAM tunnel ``name`` on it; returns the tunnel id."""
    tablestore_client.create_table(table_schema(table))
    return tablestore_tunnel_client.create_tunnel(table, name, TunnelType.STREAM)


def test_processor_error_redelivers_after_last_checkpoint_in_order(
    tablestore_client: Any, tablestore_tunnel_client: TunnelClient, unique_table: str
) -> None:
    table = f"{unique_table}p"
    tablestore_client.create_table(table_schema(table))
    _put(tablestore_client, table, "a", range(60))
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "p", TunnelType.BASE_DATA)
    processor = RecordingProcessor()
    failed_batch: list[int] = []
    lock = threading.Lock()

    def fail_once(records: list[Record], ctx: ChannelContext) -> bool:
        with lock:
            if not failed_batch and any(_n(r) == 30 for r in records):
                failed_batch.extend(_n(r) for r in records)
                return True
            return False

    processor.fail_when = fail_once
    # A service error raised by user code (e.g. its sink) must not pass for a fatal tunnel error.
    processor.fail_with = InvalidParameterError("OTSParameterInvalid", "the sink rejected a row")
    # Checkpoint rarely: only the flush on close and "finished" store progress.
    with TunnelWorker(
        tablestore_tunnel_client, tunnel_id, processor, fast_config(checkpoint_interval_s=3600)
    ) as worker:
        wait_for(
            lambda: all(
                c.status is ChannelStatus.TERMINATED
                for c in tablestore_tunnel_client.describe_tunnel(table, "p").channels
            ),
            "all base channels",
        )
        errors = worker.metrics.channel_errors
    assert worker.error is None
    assert processor.failures == 1 and errors == 1 and failed_batch
    by_channel: dict[str, list[int]] = {}
    for channel_id, batch in processor.batches:
        by_channel.setdefault(channel_id, []).extend(_n(r) for r in batch)
    delivered = sorted(n for ns in by_channel.values() for n in ns)
    assert delivered == list(range(60))  # every record exactly once after the redelivery, none lost
    for ns in by_channel.values():
        assert ns == sorted(ns)  # order preserved inside each channel
    assert set(failed_batch) <= set(delivered)


def test_expired_tunnel_stops_the_worker_with_a_clear_error(
    own_emulator: EmulatorProcess, unique_table: str
) -> None:
    tablestore_client = TableClient(**own_emulator.client_kwargs)
    tablestore_tunnel_client = TunnelClient(**own_emulator.client_kwargs)
    tablestore_emulator = own_emulator
    table = f"{unique_table}x"
    tablestore_client.create_table(table_schema(table))
    load_base_rows(tablestore_client, table, 5)
    tunnel_id = tablestore_tunnel_client.create_tunnel(table, "x", TunnelType.BASE_AND_STREAM)
    tablestore_client.put_row(table, (("pk", "late"), ("n", 1)), [Column("v", 1, BASE_MS)])
    tablestore_emulator.control.advance_time(25 * 3600)  # beyond the table's 24 h stream retention
    worker = TunnelWorker(tablestore_tunnel_client, tunnel_id, RecordingProcessor(), fast_config())
    with pytest.raises(TunnelWorkerError) as exc:
        worker.run()
    assert exc.value.code == "OTSTunnelExpired"
    assert "delete the tunnel" in str(exc.value) and "create it again" in str(exc.value)
    assert worker.error is exc.value


def test_partition_split_parent_before_children(
    tablestore_emulator: EmulatorProcess,
    tablestore_client: Any,
    tablestore_tunnel_client: TunnelClient,
    unique_table: str,
) -> None:
    table = f"{unique_table}s"
    tunnel_id = _stream_tunnel(tablestore_client, tablestore_tunnel_client, table, "s")
    processor = RecordingProcessor()
    with TunnelWorker(tablestore_tunnel_client, tunnel_id, processor, fast_config()):
        wait_for(
            lambda: len(tablestore_tunnel_client.describe_tunnel(table, "s").channels) == 2,
            "two stream channels",
        )
        _put(tablestore_client, table, "p{}", range(40))
        before = {c.channel_id for c in tablestore_tunnel_client.describe_tunnel(table, "s").channels}
        partition_id = str(tablestore_emulator.control.partitions(table)[0]["partition_id"])
        parent = next(c for c in before if c.rsplit("_", 1)[0] == partition_id.replace("_", "-"))
        tablestore_emulator.control.split_partition(table, partition_id)
        _put(tablestore_client, table, "p{}", range(40, 80))
        wait_for(lambda: len({_n(r) for r in processor.records}) == 80, "all 80 writes")
        desc = tablestore_tunnel_client.describe_tunnel(table, "s")
    children = {c.channel_id for c in desc.channels} - before
    assert children, "the split created child channels"
    assert {c.status for c in desc.channels if c.channel_id == parent} == {ChannelStatus.TERMINATED}
    order = [cid for cid, _ in processor.batches]
    parent_batches = [i for i, cid in enumerate(order) if cid == parent]
    child_batches = [i for i, cid in enumerate(order) if cid in children]
    assert child_batches, "children delivered records"
    assert parent_batches, "the parent delivered the records written before the split"
    assert max(parent_batches) < min(child_batches)


@pytest.mark.slow
def test_worker_recovers_from_an_emulator_restart(own_emulator: EmulatorProcess, unique_table: str) -> None:
    tables = TableClient(**own_emulator.client_kwargs)
    tunnels = TunnelClient(**own_emulator.client_kwargs)
    source, replica = f"{unique_table}src", f"{unique_table}dst"
    tables.create_table(table_schema(source))
    tables.create_table(table_schema(replica, stream=False))
    load_base_rows(tables, source, 120)
    tunnel_id = tunnels.create_tunnel(source, "r", TunnelType.BASE_AND_STREAM)
    processor = RecordingProcessor(tables, replica)
    with TunnelWorker(tunnels, tunnel_id, processor, fast_config()) as worker:
        wait_for(lambda: len(processor.records) > 0, "consumption to start")
        own_emulator.restart()
        mutate(tables, source, 120)
        wait_for(lambda: tunnels.describe_tunnel(source, "r").tunnel.stage is TunnelStage.PROCESS_STREAM,
                 "the base phase after the restart")
        wait_for(lambda: full_scan(tables, replica) == full_scan(tables, source), "the replica to converge")
        assert worker.error is None
    tables.close()
    tunnels.close()


def test_worker_rides_out_faults_and_reconnects_after_resource_gone(
    tablestore_emulator: EmulatorProcess,
    tablestore_client: Any,
    tablestore_tunnel_client: TunnelClient,
    unique_table: str,
) -> None:
    table = f"{unique_table}g"
    tunnel_id = _stream_tunnel(tablestore_client, tablestore_tunnel_client, table, "g")
    processor = RecordingProcessor()
    ctl = tablestore_emulator.control
    with TunnelWorker(tablestore_tunnel_client, tunnel_id, processor, fast_config()) as worker:
        wait_for(lambda: len(worker.owned_channels()) == 2, "two stream channels", workers=[worker])
        first_client = worker.client_id
        ctl.add_fault("/tunnel/checkpoint", "OTSSequenceNumberNotMatch", status=400,
                      message="sequence number not match", count=1)
        ctl.add_fault("/tunnel/readrecords", "OTSTunnelServerUnavailable", status=503, count=3)
        ctl.add_fault("/tunnel/heartbeat", "OTSServerBusy", status=503, count=2)
        _put(tablestore_client, table, "a", range(30))
        wait_for(lambda: {_n(r) for r in processor.records} == set(range(30)), "the first 30 writes",
                 workers=[worker])
        ctl.add_fault("/tunnel/heartbeat", "OTSResourceGone", status=410, message="client timed out", count=1)
        wait_for(lambda: worker.metrics.reconnects >= 1 and len(worker.owned_channels()) == 2,
                 "a reconnect with a new client id", workers=[worker])
        assert worker.client_id not in (None, first_client)
        _put(tablestore_client, table, "a", range(30, 60))
        wait_for(lambda: {_n(r) for r in processor.records} == set(range(60)), "all 60 writes",
                 workers=[worker])
    assert worker.error is None and ctl.state()["faults"] == []
    assert worker.metrics.checkpoints > 0


def test_local_heartbeat_watchdog_reconnects(
    tablestore_emulator: EmulatorProcess,
    tablestore_client: Any,
    tablestore_tunnel_client: TunnelClient,
    unique_table: str,
) -> None:
    table = f"{unique_table}h"
    tunnel_id = _stream_tunnel(tablestore_client, tablestore_tunnel_client, table, "h")
    processor = RecordingProcessor()
    with TunnelWorker(tablestore_tunnel_client, tunnel_id, processor, fast_config()) as worker:
        wait_for(lambda: len(worker.owned_channels()) == 2, "two stream channels", workers=[worker])
        first_client = worker.client_id
        # Heartbeats are not retried on a 500: with 15 failures in a row (≈4.5 s at 0.3 s) no heartbeat
        # succeeds for longer than the 3 s heartbeat timeout, so the watchdog must give up the session.
        tablestore_emulator.control.add_fault(
            "/tunnel/heartbeat", "OTSInternalServerError", status=500, count=15
        )
        wait_for(lambda: worker.metrics.reconnects >= 1, "the watchdog to drop the session", workers=[worker])
        _put(tablestore_client, table, "b", range(20))
        wait_for(
            lambda: {_n(r) for r in processor.records} == set(range(20)),
            "the writes after reconnecting",
            workers=[worker],
        )
        assert worker.client_id not in (None, first_client)
    assert worker.error is None


def test_closing_channel_stops_flushes_and_reports_close(
    tablestore_client: Any, tablestore_tunnel_client: TunnelClient, unique_table: str
) -> None:
    table = f"{unique_table}c"
    tunnel_id = _stream_tunnel(tablestore_client, tablestore_tunnel_client, table, "c")
    processor = RecordingProcessor()
    # Periodic checkpoints effectively off: only the flush on close can store progress.
    with TunnelWorker(
        tablestore_tunnel_client, tunnel_id, processor, fast_config(checkpoint_interval_s=3600)
    ) as worker:
        wait_for(lambda: len(worker.owned_channels()) == 2, "two stream channels", workers=[worker])
        _put(tablestore_client, table, "c", range(30))
        wait_for(lambda: len(processor.records) == 30, "the writes", workers=[worker])
        target = processor.batches[0][0]  # the channel that got the writes (one partition key)
        delivered_on_target = sum(len(b) for cid, b in processor.batches if cid == target)
        probe = tablestore_tunnel_client.connect(tunnel_id, timeout_s=30, client_tag="probe")
        token_before, seq_before = tablestore_tunnel_client.get_checkpoint(tunnel_id, probe, target)
        tablestore_tunnel_client.schedule(
            tunnel_id, [Channel(target, 0, ChannelStatus.CLOSING)]
        )  # suspend it
        wait_for(lambda: target not in worker.owned_channels(), "the worker to let the channel go",
                 workers=[worker])
        wait_for(lambda: next(c for c in tablestore_tunnel_client.describe_tunnel(table, "c").channels
                              if c.channel_id == target).status is ChannelStatus.CLOSE,
                 "the CLOSE report", workers=[worker])
        token_after, seq_after = tablestore_tunnel_client.get_checkpoint(tunnel_id, probe, target)
    assert delivered_on_target > 0
    assert seq_after > seq_before and token_after != token_before  # the last processed token was flushed
    tablestore_tunnel_client.shutdown(tunnel_id, probe)


def test_deleted_tunnel_is_fatal_with_advice(
    tablestore_client: Any, tablestore_tunnel_client: TunnelClient, unique_table: str
) -> None:
    worker = TunnelWorker(tablestore_tunnel_client, "no-such-tunnel-id", RecordingProcessor(), fast_config())
    with pytest.raises(TunnelWorkerError) as missing:
        worker.run()
    assert missing.value.code == "OTSParameterInvalid" and "does not exist" in str(missing.value)

    table = f"{unique_table}d"
    tunnel_id = _stream_tunnel(tablestore_client, tablestore_tunnel_client, table, "d")
    running = TunnelWorker(tablestore_tunnel_client, tunnel_id, RecordingProcessor(), fast_config()).start()
    wait_for(lambda: len(running.owned_channels()) == 2, "two stream channels", workers=[running])
    tablestore_tunnel_client.delete_tunnel(table, "d")
    with pytest.raises(TunnelWorkerError) as deleted:
        running.join(timeout=60)
    assert deleted.value.code == "OTSParameterInvalid" and not running.is_alive()
    assert tunnel_id in str(deleted.value)
