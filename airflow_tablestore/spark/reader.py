"""Executor side of a round: read one channel from its server checkpoint and hand the records to the sink.

A round is planned on the driver as a picklable :class:`RoundPlan`; Spark runs :func:`round_function` through
``mapInArrow`` over one row per channel, and every task returns one Arrow **control row**
(:data:`CONTROL_SCHEMA`: next token, finished, record count, max sequence timestamp, timings) that the driver
checkpoints once the whole round succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.tunnel import FINISHED, enough_data
from airflow_tablestore.spark.settings import TablestoreSettings
from airflow_tablestore.spark.sinks import Sink

CONTROL_SCHEMA = pa.schema([
    pa.field("channel_id", pa.string()),
    pa.field("start_token", pa.string()),
    pa.field("next_token", pa.string()),
    pa.field("finished", pa.bool_()),
    pa.field("records", pa.int64()),
    pa.field("bytes", pa.int64()),
    pa.field("reads", pa.int64()),
    pa.field("max_sequence_timestamp_us", pa.int64()),
    pa.field("reached_cutoff", pa.bool_()),
    pa.field("caught_up", pa.bool_()),
    pa.field("read_seconds", pa.float64()),
    pa.field("sink_seconds", pa.float64()),
    pa.field("task_seconds", pa.float64()),
])
"""One row per channel and round, returned by the Spark tasks to the driver."""

CONTROL_DDL = (
    "channel_id string, start_token string, next_token string, finished boolean, records long, bytes long, "
    "reads long, max_sequence_timestamp_us long, reached_cutoff boolean, caught_up boolean, "
    "read_seconds double, sink_seconds double, task_seconds double"
)
""":data:`CONTROL_SCHEMA` as a Spark DDL string (the ``mapInArrow`` output schema)."""


@dataclass(frozen=True)
class ChannelTask:
    """One channel to read in a round, from ``start_token`` (the server checkpoint)."""

    channel_id: str
    start_token: str
    stream: bool


@dataclass(frozen=True)
class RoundPlan:
    """Everything a Spark task needs; pickled into the task closure (the settings repr masks secrets)."""

    settings: TablestoreSettings
    tunnel_id: str
    client_id: str
    tasks: tuple[ChannelTask, ...]
    sink: Sink
    max_records: int
    cutoff_us: int | None = None
    request_timeout: float = 60.0
    max_bytes: int = 256 * 1024 * 1024


def read_channel(client: Any, plan: RoundPlan, task: ChannelTask) -> dict[str, Any]:
    """Read ``task``'s channel until "finished", the record or byte cap, the cutoff or (stream) the head of the
    log; write every record to the sink; return the control row. Raises if a read or a sink write fails."""
    started = time.perf_counter()
    row: dict[str, Any] = {
        "channel_id": task.channel_id, "start_token": task.start_token, "next_token": task.start_token,
        "finished": task.start_token == FINISHED, "records": 0, "bytes": 0, "reads": 0,
        "max_sequence_timestamp_us": None, "reached_cutoff": False, "caught_up": False,
        "read_seconds": 0.0, "sink_seconds": 0.0, "task_seconds": 0.0,
    }
    if row["finished"]:  # a previous owner finished it; nothing to read (never ReadRecords "finished")
        return row
    writer = plan.sink.open(task.channel_id, task.start_token)
    token = task.start_token
    count = size = reads = 0
    read_s = sink_s = 0.0
    max_ts: int | None = None
    cutoff = plan.cutoff_us
    while True:
        t0 = time.perf_counter()
        result = client.read_records(plan.tunnel_id, plan.client_id, task.channel_id, token)
        t1 = time.perf_counter()
        read_s += t1 - t0
        reads += 1
        size += result.size_bytes
        records = result.records
        if records:
            writer.write(records)
            sink_s += time.perf_counter() - t1
            count += len(records)
            for record in records:
                seq = record.sequence
                if seq is not None and (max_ts is None or seq.timestamp > max_ts):
                    max_ts = seq.timestamp
            if cutoff is not None and max_ts is not None and max_ts >= cutoff:
                row["reached_cutoff"] = True  # the rest of this batch is written too, not skipped
        previous, token = token, result.next_token
        if token == FINISHED:
            row["finished"] = True
            break
        if row["reached_cutoff"] or count >= plan.max_records or size >= plan.max_bytes:
            break
        if task.stream:
            if not records or not enough_data(result):
                row["caught_up"] = True
                break
        elif not records and token == previous:
            row["caught_up"] = True  # defensive: a base channel that stopped moving
            break
    t2 = time.perf_counter()
    written = writer.close()
    sink_s += time.perf_counter() - t2
    if written != count:
        raise RuntimeError(f"sink wrote {written} of {count} records of channel {task.channel_id}")
    row.update(next_token=token, records=count, bytes=size, reads=reads, max_sequence_timestamp_us=max_ts,
               read_seconds=read_s, sink_seconds=sink_s, task_seconds=time.perf_counter() - started)
    return row


def round_function(plan: RoundPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a round: input rows carry an ``id`` indexing ``plan.tasks``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = None
        try:
            for batch in batches:
                for index in batch.column("id").to_pylist():
                    if client is None:
                        client = plan.settings.tunnel_client(timeout=plan.request_timeout)
                    row = read_channel(client, plan, plan.tasks[int(index)])
                    yield pa.RecordBatch.from_pylist([row], schema=CONTROL_SCHEMA)
        finally:
            if client is not None:
                client.close()

    return run


def run_round_locally(plan: RoundPlan) -> list[dict[str, Any]]:
    """Run a round without Spark, sequentially (tests, and the TunnelWorker-free baseline)."""
    fn = round_function(plan)
    ids = pa.RecordBatch.from_pydict({"id": list(range(len(plan.tasks)))})
    return [row for batch in fn(iter([ids])) for row in batch.to_pylist()]
