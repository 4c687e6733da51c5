"""The streaming source's driver side without Spark: micro-batches planned by StreamPlanner and read in-process
by the read-task function, against a real emulator (Spark runs the same calls in test_stream_read.py)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StructType
from replication_helpers import make_source, stream_changes, write_key

from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions
from airflow_tablestore.spark.stream.output import change_log_schema
from airflow_tablestore.spark.stream.planner import StreamPlanner, StreamStuckError
from airflow_tablestore.spark.stream.reader import TablestoreStreamReader
from demo import replication as demo

ROWS = 500


def options(settings: ConnectionSettings, table: str, tunnel: str, **extra: Any) -> SourceOptions:
    return dataclasses.replace(SourceOptions(settings=settings, table=table), tunnel=tunnel, settle_ms=100,
                               heartbeat_interval=1.0, **extra)


def drain(reader: TablestoreStreamReader, start: dict[str, Any], *, read: bool = True,
          max_rows: int | None = None) -> tuple[list[Any], dict[str, Any], int]:
    """availableNow by hand: batches until the end offset equals the start; returns (records, offset, batches)."""
    planner = reader.planner
    planner.prepare_available_now()
    records: list[Any] = []
    batches = 0
    while True:
        end = planner.latest_offset(start, max_rows)
        if end == start:
            return records, end, batches
        batches += 1
        for partition in reader.partitions(start, end):
            if read:
                for batch in reader.read(partition):
                    records += arrow_to_records(pa.Table.from_batches([batch]))
        planner.commit(end)
        start = end


@pytest.fixture(scope="module")
def table(client: TableClient, settings: ConnectionSettings) -> str:
    with settings.tunnel_client() as tunnels:
        make_source(client, tunnels, "planner_src", "feed", ROWS)
    return "planner_src"


def reader_for(settings: ConnectionSettings, table: str, tunnel: str = "feed", **extra: Any) -> TablestoreStreamReader:
    return TablestoreStreamReader(options(settings, table, tunnel, **extra), change_log_schema())


def test_batches_by_hand_read_everything_once_then_stop(settings: ConnectionSettings, client: TableClient,
                                                        table: str) -> None:
    gone: set[int] = set()
    writes = demo.write_changes(client, table, ROWS, 150, gone=gone)
    reader = reader_for(settings, table)
    try:
        start = reader.initialOffset()
        records, end, batches = drain(reader, start, max_rows=90)
        assert batches >= (ROWS + 150) // 90
        assert len([r for r in records if r.sequence is None]) == ROWS
        assert stream_changes(records) == Counter(write_key(w) for w in writes)
        # a batch nobody read (a foreachBatch that ignores its DataFrame): the driver finds where its spans
        # ended by reading them itself, and the next batch starts after them
        skipped = demo.write_changes(client, table, ROWS, 40, offset=1, gone=gone)
        _, end, _ = drain(reader, end, read=False)
        later = demo.write_changes(client, table, ROWS, 30, offset=2, gone=gone)
        records, _, _ = drain(reader, end)
        assert stream_changes(records) == Counter(write_key(w) for w in later)
        assert not set(stream_changes(records)) & {write_key(w) for w in skipped}
    finally:
        reader.stop()


def test_an_offset_of_another_tunnel_id_is_refused(settings: ConnectionSettings, table: str) -> None:
    reader = reader_for(settings, table)
    try:
        with pytest.raises(OptionError, match="recreated"):
            reader.planner.latest_offset({"tunnel_id": "another", "channels": {}}, None)
    finally:
        reader.stop()


def test_channels_held_by_another_client_end_in_a_clear_error(settings: ConnectionSettings, client: TableClient,
                                                              table: str) -> None:
    with settings.tunnel_client() as tunnels:
        tunnel_id = tunnels.create_tunnel(table, "held")
        holder = tunnels.connect(tunnel_id, timeout_s=600)
        tunnels.heartbeat(tunnel_id, holder, [])  # takes every channel and keeps them
        reader = reader_for(settings, table, "held", channel_wait_s=2)
        try:
            reader.planner.prepare_available_now()
            with pytest.raises(StreamStuckError, match="held by"):
                reader.planner.latest_offset(reader.initialOffset(), None)
        finally:
            reader.stop()
            tunnels.shutdown(tunnel_id, holder)


def test_missing_tunnel_option_and_unknown_tunnel(settings: ConnectionSettings, table: str) -> None:
    with pytest.raises(OptionError, match="'tunnel' is required"):
        StreamPlanner(SourceOptions(settings=settings, table=table))
    with pytest.raises(OptionError, match="does not exist"):
        StreamPlanner(options(settings, table, "nope"))
    assert isinstance(change_log_schema(), StructType)


def test_a_batch_runs_at_most_max_tasks_per_batch_tasks(settings: ConnectionSettings, client: TableClient) -> None:
    """One task reads several channels' spans in turn, each span's end stored: still every record once."""
    with settings.tunnel_client() as tunnels:
        make_source(client, tunnels, "grouped_src", "feed", ROWS)
    gone: set[int] = set()
    writes = demo.write_changes(client, "grouped_src", ROWS, 120, gone=gone)
    reader = reader_for(settings, "grouped_src", max_tasks_per_batch=1)
    planner = reader.planner
    try:
        planner.prepare_available_now()
        start, records, widest = reader.initialOffset(), [], 0
        while (end := planner.latest_offset(start, 300)) != start:
            partitions = reader.partitions(start, end)
            assert len(partitions) == 1
            widest = max(widest, len(partitions[0].spans))
            for batch in reader.read(partitions[0]):
                records += arrow_to_records(pa.Table.from_batches([batch]))
            planner.commit(end)
            start = end
        assert widest >= 2  # one task read several channels' spans
        assert len([r for r in records if r.sequence is None]) == ROWS
        assert stream_changes(records) == Counter(write_key(w) for w in writes)
    finally:
        reader.stop()
