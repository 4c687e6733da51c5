"""``TablestoreStreamReader``: a tunnel as a Spark Structured Streaming source (``spark.readStream``).

Spark keeps one reader per query in its source process on the driver: the
:class:`~airflow_tablestore.spark.stream.planner.StreamPlanner` it holds plans micro-batches and moves the
tunnel's server checkpoints; :meth:`TablestoreStreamReader.read` runs in the executors, one task per group of
channel spans (at most ``max_tasks_per_batch`` tasks per micro-batch), and stores where each span ended once its
records are out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from airflow_tablestore.client.records import Records
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.span import Span, SpanRead
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.stream.output import ChangeOutput
from airflow_tablestore.spark.stream.planner import ChannelSpan, StreamPlanner
from airflow_tablestore.spark.stream.positions import PositionStore

BATCH_ROWS = 10_000


@dataclass(frozen=True)
class SpanPartition(InputPartition):
    """One read task of a micro-batch: some channels' spans, read one after another (picklable; the settings'
    repr masks the secret)."""

    options: SourceOptions
    tunnel_id: str
    client_id: str
    spans: tuple[tuple[str, dict[str, Any]], ...]
    """(channel id, span as a dict), in channel order."""
    output: ChangeOutput


def group_spans(spans: Sequence[ChannelSpan], max_tasks: int) -> list[list[ChannelSpan]]:
    """The spans of a micro-batch dealt to at most ``max_tasks`` tasks, round robin over the (sorted) channels,
    so a task's fixed cost (Spark's scheduling, the Python worker's set-up, a client) is paid once for several
    channels. Deterministic: a re-run batch groups its spans the same way."""
    count = max(1, min(len(spans), max_tasks))
    return [list(spans[i::count]) for i in range(count)] if spans else []


class TablestoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The changes of a table through a tunnel: base data first, then the stream."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.output = ChangeOutput.for_schema(options, schema)
        self._planner: StreamPlanner | None = None

    @property
    def planner(self) -> StreamPlanner:
        """Created on first use: only Spark's source process plans (the reader is also pickled for the
        read tasks, without it)."""
        if self._planner is None:
            self._planner = StreamPlanner(self.options)
        return self._planner

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planner": None}

    def initialOffset(self) -> dict:
        return self.planner.initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        rows = self.options.max_records_per_trigger
        return ReadMaxRows(rows) if rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.planner.latest_offset(start, max_rows)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        spans = self.planner.partitions(start, end)
        client_id = self.planner.client_id if spans else ""
        return [SpanPartition(self.options, self.planner.tunnel_id, client_id,
                              tuple((s.channel_id, s.span.as_dict()) for s in group), self.output)
                for group in group_spans(spans, self.options.max_tasks_per_batch)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SpanPartition)
        return read_span_partition(partition)

    def commit(self, end: dict) -> None:
        self.planner.commit(end)

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.stop()


def read_span_partition(partition: SpanPartition) -> Iterator[pa.RecordBatch]:
    """Read the partition's spans in turn with one client, yield their records as Arrow batches, and store where
    each span ended once its records are out."""
    settings = partition.options.settings
    client = settings.tunnel_client()
    store = PositionStore(settings, partition.options.positions_table)
    try:
        for channel_id, data in partition.spans:
            yield from _read_span(partition, client, store, channel_id, Span.from_dict(data))
    finally:
        store.close()
        client.close()


def _read_span(partition: SpanPartition, client: TunnelClient, store: PositionStore, channel_id: str,
               span: Span) -> Iterator[pa.RecordBatch]:
    read = SpanRead(client, partition.tunnel_id, partition.client_id, channel_id, span,
                    settle_us=partition.options.settle_ms * 1000)
    chunk = span.key(channel_id)
    buffer: list[Records] = []  # answers, joined into one batch's input (built straight from their bytes)
    held = 0
    index = 0
    for records in read:
        buffer.append(records)
        held += len(records)
        if held >= BATCH_ROWS:
            yield from partition.output.batches(Records.concat(buffer), channel_id, chunk, index)
            index += held
            buffer, held = [], 0
    if buffer:
        yield from partition.output.batches(Records.concat(buffer), channel_id, chunk, index)
    assert read.end is not None
    store.put_end(partition.tunnel_id, chunk, read.end)
