"""``TablestoreStreamReader``: a tunnel as a Spark Structured Streaming source (``spark.readStream``).

Spark keeps one reader per query in its source process on the driver: the
:class:`~airflow_tablestore.spark.stream.planner.StreamPlanner` it holds plans micro-batches and moves the
tunnel's server checkpoints; :meth:`TablestoreStreamReader.read` runs in the executors, one task per channel
span, and stores where the span ended before it returns.
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
from airflow_tablestore.client.tunnel.span import Span, SpanRead
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.stream.output import ChangeOutput
from airflow_tablestore.spark.stream.planner import StreamPlanner
from airflow_tablestore.spark.stream.positions import PositionStore

BATCH_ROWS = 10_000


@dataclass(frozen=True)
class SpanPartition(InputPartition):
    """One channel's span of a micro-batch (picklable; the settings' repr masks the secret)."""

    options: SourceOptions
    tunnel_id: str
    client_id: str
    channel_id: str
    span: dict[str, Any]
    output: ChangeOutput


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
        return [SpanPartition(self.options, self.planner.tunnel_id, client_id, s.channel_id, s.span.as_dict(),
                              self.output) for s in spans]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SpanPartition)
        return read_span_partition(partition)

    def commit(self, end: dict) -> None:
        self.planner.commit(end)

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.stop()


def read_span_partition(partition: SpanPartition) -> Iterator[pa.RecordBatch]:
    """Read the span, yield its records as Arrow batches, then store where it ended."""
    settings = partition.options.settings
    span = Span.from_dict(partition.span)
    client = settings.tunnel_client()
    store = PositionStore(settings, partition.options.positions_table)
    try:
        read = SpanRead(client, partition.tunnel_id, partition.client_id, partition.channel_id, span,
                        settle_us=partition.options.settle_ms * 1000)
        chunk = span.key(partition.channel_id)
        buffer: list[Records] = []  # answers, joined into one batch's input (built straight from their bytes)
        held = 0
        index = 0
        for records in read:
            buffer.append(records)
            held += len(records)
            if held >= BATCH_ROWS:
                yield from partition.output.batches(Records.concat(buffer), partition.channel_id, chunk, index)
                index += held
                buffer, held = [], 0
        if buffer:
            yield from partition.output.batches(Records.concat(buffer), partition.channel_id, chunk, index)
        assert read.end is not None
        store.put_end(partition.tunnel_id, chunk, read.end)
    finally:
        store.close()
        client.close()

