"""StreamWorker status table rows and faults: missing/disabled stream, trimmed data, status-table name clash,
processor exceptions — each with its documented outcome and nothing lost."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    StreamSpec,
    TableSchema,
)
from airflow_tablestore.client.stream.lease import SHARD_END, STATUS_SCHEMA_ERROR, STATUS_TYPE, LeaseManager
from airflow_tablestore.client.stream.processor import ShardInfo, ShutdownReason
from airflow_tablestore.client.stream.worker import STREAM_NOT_FOUND, StreamWorker, StreamWorkerError
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess

from .replica import Sink, Writer, fast_config, scan, schema, stream_contents, wait_until

ATTRIBUTES = {"Checkpoint", "LeaseCounter", "LeaseOwner", "LeaseStealer", "ParentShardIds"}


def _delivered(sink: Sink) -> set[tuple[object, tuple[int, int]]]:
    with sink.lock:
        return set(sink.seen)


def _initialized(sink: Sink) -> set[str]:
    with sink.lock:
        return set(sink.initialized)


def _source(client: TableClient, source: str, writes: int, *, seed: int = 7) -> Writer:
    """A stream-enabled table with ``writes`` random changes already made; the returned writer can add
    more."""
    client.create_table(schema(source, stream=True))
    return Writer(client, source, seed=seed).write(writes)


def _consume_all_then_stop(tablestore_client: TableClient, source: str, status: str, *,
                           by_record: bool) -> tuple[StreamWorker, set[tuple[object, tuple[int, int]]]]:
    """Run a worker until it delivered every record in the stream now, then shut it down (checkpoints saved);
    returns the stopped worker and what it delivered."""
    sink = Sink()
    sink.by_record = by_record
    worker = StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "w")).start()
    before = stream_contents(tablestore_client, source)
    wait_until(lambda: _delivered(sink) == before, what="the first records")
    worker.shutdown()
    return worker, before


def test_status_table_rows_match_the_schema(
    tablestore_emulator: EmulatorProcess, tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    source, status = names("src"), names("status")
    _source(tablestore_client, source, 60)
    sink = Sink()
    worker = StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "solo")).start()
    try:
        sid = worker.stream_id
        parent = tablestore_emulator.control.partitions(source)[0]["partition_id"]
        children = {c["partition_id"] for c in tablestore_emulator.control.split_partition(source, parent)}
        expected = stream_contents(tablestore_client, source)
        assert len(expected) >= 40
        wait_until(lambda: _delivered(sink) == expected, what="every stream record delivered")
        wait_until(lambda: len(LeaseManager(tablestore_client, status).list(str(sid))) == 8, what="8 leases")
        wait_until(lambda: len(worker.owned_shards()) == 7, what="the 7 open shards owned")
        owned_while_running = set(worker.owned_shards())
        # a processor is shut down (REQUESTED, asserted below) only once initialized: the new children may not
        # have started yet on a busy machine
        wait_until(
            lambda: _initialized(sink) >= owned_while_running, what="every owned shard's processor started"
        )
    finally:
        worker.shutdown()
    pk = tablestore_client.describe_table(status).schema.primary_key
    assert [(c.name, c.type) for c in pk] == [
        ("StreamId", PrimaryKeyType.STRING),
        ("StatusType", PrimaryKeyType.STRING),
        ("StatusValue", PrimaryKeyType.STRING),
    ]
    rows = list(
        tablestore_client.iter_range(
            status,
            [("StreamId", INF_MIN), ("StatusType", INF_MIN), ("StatusValue", INF_MIN)],
            [("StreamId", INF_MAX), ("StatusType", INF_MAX), ("StatusValue", INF_MAX)],
        )
    )
    shards = {p["partition_id"] for p in tablestore_emulator.control.partitions(source)}
    assert {dict(r.primary_key)["StatusValue"] for r in rows} == shards and len(rows) == 8
    for row in rows:
        key = dict(row.primary_key)
        assert key["StreamId"] == sid and key["StatusType"] == STATUS_TYPE
        values = {c.name: c.value for c in row.columns}
        assert set(values) == ATTRIBUTES
        assert isinstance(values["LeaseCounter"], int) and values["LeaseCounter"] >= 1
        assert values["LeaseOwner"] == "" and values["LeaseStealer"] == ""  # released at shutdown
        assert isinstance(values["Checkpoint"], str) and values["Checkpoint"]
        parents = json.loads(str(values["ParentShardIds"]))
        assert parents == ([parent] if key["StatusValue"] in children else [])
    by_shard = {dict(r.primary_key)["StatusValue"]: {c.name: c.value for c in r.columns} for r in rows}
    assert by_shard[parent]["Checkpoint"] == SHARD_END
    assert owned_while_running == shards - {parent}
    assert sink.shutdowns[parent] == [ShutdownReason.TERMINATE]
    assert all(sink.shutdowns[s] == [ShutdownReason.REQUESTED] for s in shards - {parent})


def test_missing_and_disabled_stream(tablestore_client: TableClient, names: Callable[[str], str]) -> None:
    status = names("status")
    with pytest.raises(StreamWorkerError) as err:
        StreamWorker(tablestore_client, names("missing"), Sink().processor, fast_config(status, "w")).start()
    assert err.value.code == STREAM_NOT_FOUND and "does not exist" in str(err.value)
    plain = names("plain")
    tablestore_client.create_table(schema(plain, stream=False))
    with pytest.raises(StreamWorkerError) as err:
        StreamWorker(tablestore_client, plain, Sink().processor, fast_config(status, "w")).start()
    assert err.value.code == STREAM_NOT_FOUND and "no stream enabled" in str(err.value)
    # a stream disabled while the worker runs stops it with the same error (surfaced by join)
    source = names("src")
    tablestore_client.create_table(schema(source, stream=True))
    sink = Sink()
    worker = StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "w")).start()
    tablestore_client.update_table(source, stream=StreamSpec(False))
    with pytest.raises(StreamWorkerError) as err:
        worker.join(timeout=60)
    assert err.value.code == STREAM_NOT_FOUND and "no longer exists" in str(err.value)


def test_status_table_name_clash(tablestore_client: TableClient, names: Callable[[str], str]) -> None:
    source, clash = names("src"), names("clash")
    tablestore_client.create_table(schema(source, stream=True))
    tablestore_client.create_table(TableSchema(clash, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    tablestore_client.put_row(clash, [("id", 1)], {"keep": "me"})
    with pytest.raises(TablestoreClientError) as err:
        StreamWorker(tablestore_client, source, Sink().processor, fast_config(clash, "w")).start()
    assert err.value.code == STATUS_SCHEMA_ERROR
    assert clash in str(err.value) and "StreamId" in str(err.value) and "choose another" in str(err.value)
    row = tablestore_client.get_row(clash, [("id", 1)])
    assert row is not None and row.get("keep") == "me"  # untouched


def test_processor_exceptions_redeliver_the_batch(
    tablestore_emulator: EmulatorProcess, tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    source, replica, status = names("src"), names("dst"), names("status")
    tablestore_client.create_table(schema(source, stream=True))
    tablestore_client.create_table(schema(replica, stream=False))
    writer = Writer(tablestore_client, source, seed=3)
    writer.write(120)
    sink = Sink(tablestore_client, replica)
    sink.fail_first = {p["partition_id"] for p in tablestore_emulator.control.partitions(source)}
    worker = StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "w")).start()
    try:
        wait_until(
            lambda: scan(tablestore_client, source) == scan(tablestore_client, replica),
            what="replica == source",
        )
    finally:
        worker.shutdown()
    shards_with_data = {s for s, _, _ in sink.log}
    assert shards_with_data and shards_with_data <= sink.failed  # every shard's first batch failed once
    assert worker.metrics.processor_errors == len(sink.failed)
    assert _delivered(sink) == stream_contents(tablestore_client, source) and sink.violations == []


@pytest.mark.parametrize("by_record", [False, True], ids=["iterator-checkpoint", "record-checkpoint"])
def test_trimmed_checkpoint_restarts_at_the_oldest_record(
    tablestore_emulator: EmulatorProcess,
    tablestore_client: TableClient,
    names: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
    by_record: bool,
) -> None:
    source, status = names("src"), names("status")
    writer = _source(tablestore_client, source, 30, seed=5)
    worker, before = _consume_all_then_stop(tablestore_client, source, status, by_record=by_record)
    checkpoints = [
        lease.checkpoint for lease in LeaseManager(tablestore_client, status).list(str(worker.stream_id))
    ]
    assert any(c.startswith("TS:") for c in checkpoints) == by_record
    writer.write(30)  # these will be trimmed before anyone reads them
    tablestore_emulator.control.set_retention(source, 0.001)  # 3.6 s
    tablestore_emulator.control.advance_time(60)
    writer.write(20)
    retained = stream_contents(tablestore_client, source)
    second = Sink()
    caplog.set_level(logging.WARNING, logger="airflow_tablestore.client.stream")
    worker = StreamWorker(tablestore_client, source, second.processor, fast_config(status, "w")).start()
    try:
        wait_until(lambda: _delivered(second) == retained, what="the retained records")
    finally:
        worker.shutdown()
    assert worker.metrics.trimmed_restarts >= 1
    assert any("trimmed" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
    assert retained and not (before & retained)  # only the 20 newest records survived the retention
    assert _delivered(second) == retained
    assert second.violations == []


def test_record_checkpoint_resumes_right_after_the_record(tablestore_client: TableClient,
                                                          names: Callable[[str], str]) -> None:
    source, status = names("src"), names("status")
    writer = _source(tablestore_client, source, 40, seed=9)
    _, before = _consume_all_then_stop(tablestore_client, source, status, by_record=True)
    writer.write(40)
    second = Sink()
    worker = StreamWorker(tablestore_client, source, second.processor, fast_config(status, "w")).start()
    after = stream_contents(tablestore_client, source) - before
    try:
        wait_until(lambda: _delivered(second) == after, what="only the new records")
    finally:
        worker.shutdown()
    assert after and second.redelivered == 0 and len(second.log) == len(after)


def test_service_errors_are_survived(
    tablestore_emulator: EmulatorProcess, names: Callable[[str], str]
) -> None:
    from airflow_tablestore.client.retry import RetryPolicy

    source, status = names("src"), names("status")
    client = TableClient(
        **tablestore_emulator.client_kwargs,
        retry=RetryPolicy(max_attempts=2, total_budget_s=2, base_delay_s=0.01, max_delay_s=0.05),
    )
    _source(client, source, 80, seed=13)
    expected = stream_contents(client, source)
    sink = Sink()
    worker = StreamWorker(client, source, sink.processor, fast_config(status, "w")).start()
    control = tablestore_emulator.control
    try:
        control.add_fault("/DescribeStream", "OTSInternalServerError", status=500, count=6)
        control.add_fault("/GetRange", "OTSInternalServerError", status=500, count=4)  # lease scans
        control.add_fault("/GetStreamRecord", "OTSServerUnavailable", status=503, count=8)
        control.add_fault(
            "/UpdateRow", "OTSInternalServerError", status=500, count=4
        )  # renewals, checkpoints
        wait_until(lambda: _delivered(sink) == expected, what="every record despite the faults")
        wait_until(lambda: not control.state()["faults"], what="all injected faults consumed")
        assert worker._thread is not None and worker._thread.is_alive()  # noqa: SLF001 - still running
    finally:
        control.clear_faults()
        worker.shutdown()
        client.close()
    worker.join()  # no fatal error recorded
    assert worker.metrics.coordinator_errors >= 1
    assert sink.violations == []


def test_merge_child_waits_for_both_parents(
    tablestore_emulator: EmulatorProcess, tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    source, replica, status = names("src"), names("dst"), names("status")
    tablestore_client.create_table(schema(source, stream=True))
    tablestore_client.create_table(schema(replica, stream=False))
    writer = Writer(tablestore_client, source, seed=21)
    writer.write(60)
    sink = Sink(tablestore_client, replica)
    parts = tablestore_emulator.control.partitions(source)
    slow = parts[1]["partition_id"]
    sink.fail_first = {slow}  # one parent is held back by a failing first batch
    worker = StreamWorker(tablestore_client, source, sink.processor, fast_config(status, "w")).start()
    try:
        merged = tablestore_emulator.control.merge_partitions(source, parts[0]["partition_id"], slow)
        assert merged["parent_ids"] == [parts[0]["partition_id"], slow]
        for _ in range(60):
            writer.write_one()
        wait_until(
            lambda: _delivered(sink) == stream_contents(tablestore_client, source), what="every record"
        )
    finally:
        worker.shutdown()
    assert scan(tablestore_client, source) == scan(tablestore_client, replica) and sink.violations == []
    position = {
        s: [i for i, (shard, _, _) in enumerate(sink.log) if shard == s] for s in merged["parent_ids"]
    }
    child = [i for i, (shard, _, _) in enumerate(sink.log) if shard == merged["partition_id"]]
    assert child and all(p and max(p) < min(child) for p in position.values())
    lease = LeaseManager(tablestore_client, status).get(str(worker.stream_id), merged["partition_id"])
    assert lease is not None and lease.parent_shard_ids == tuple(merged["parent_ids"])


def test_shutdown_from_a_processor(tablestore_client: TableClient, names: Callable[[str], str]) -> None:
    from airflow_tablestore.client.stream.processor import CallbackRecordProcessor

    source, status = names("src"), names("status")
    _source(tablestore_client, source, 30, seed=17)
    seen: list[int] = []
    holder: list[StreamWorker] = []

    def stop_after_first_batch(shard: ShardInfo, records: list[Record]) -> None:
        seen.append(len(records))
        holder[0].shutdown()

    worker = StreamWorker(
        tablestore_client,
        source,
        lambda s: CallbackRecordProcessor(stop_after_first_batch),
        fast_config(status, "w"),
    )
    holder.append(worker)
    worker.run()  # returns once the processor asked for shutdown
    assert seen and worker.owned_shards() == []
    leases = LeaseManager(tablestore_client, status).list(str(worker.stream_id))
    assert leases and all(lease.owner == "" for lease in leases)
    assert any(lease.checkpoint not in ("TRIM_HORIZON", SHARD_END) for lease in leases)  # progress was saved


def test_checkpointer_refuses_points_beyond_delivery(
    tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    from airflow_tablestore.client.model import SequenceInfo
    from airflow_tablestore.client.stream.processor import Checkpointer, RecordProcessor

    source, status = names("src"), names("status")
    _source(tablestore_client, source, 20, seed=19)
    outcomes: list[list[str]] = []

    class Probe(RecordProcessor):
        def process_records(self, records: list[Record], checkpointer: Checkpointer) -> None:
            seq = records[-1].sequence
            assert seq is not None
            future = records[-1]._replace(sequence=SequenceInfo(seq.epoch, seq.timestamp + 10**9, 0))
            batch: list[str] = []
            for point in (future, SHARD_END, ""):
                try:
                    checkpointer.checkpoint(point)
                    batch.append("accepted")
                except ValueError:
                    batch.append("refused")
            checkpointer.checkpoint(records[0])  # a delivered record is fine
            batch.append("ok")
            outcomes.append(batch)

    worker = StreamWorker(tablestore_client, source, lambda s: Probe(), fast_config(status, "w")).start()
    try:
        wait_until(lambda: outcomes, what="one probed batch")
    finally:
        worker.shutdown()
    assert all(batch == ["refused", "refused", "refused", "ok"] for batch in outcomes)
    assert worker.metrics.processor_errors == 0
