"""Executor side of a round: read channels from their server checkpoints and hand the records to the sink.

A round is planned on the driver as a picklable :class:`RoundPlan`; Spark runs :func:`round_function` through
``mapInArrow`` over one row per Spark task, each task reads its share of the round's channels one after another
(:meth:`RoundPlan.assigned`), and returns one Arrow **control row** per channel
(:class:`~airflow_tablestore.spark.consumer.round_result.ChannelResult`: next token, finished, record count, max
sequence timestamp, timings) that the driver checkpoints once the whole round succeeded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.errors import is_transient
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.tunnel.reads import FINISHED
from airflow_tablestore.client.tunnel.span import Position, Span, SpanEnd, SpanRead
from airflow_tablestore.spark.consumer.round_result import ChannelResult
from airflow_tablestore.spark.sinks.protocol import ChannelWriter, Sink


@dataclass(frozen=True)
class ChannelTask:
    """One channel's read assignment shipped to a Spark executor (picklable; why its own type: the executor
    has no session, only this).

    One channel to read in a round, from ``start_token`` (the server checkpoint, stored with
    ``sequence``; the round commits with ``sequence + 1``)."""

    channel_id: str
    start_token: str
    stream: bool
    sequence: int = 0


@dataclass(frozen=True)
class RoundPlan:
    """Everything a Spark task needs; pickled into the task closure (the settings repr masks secrets)."""

    settings: ConnectionSettings
    tunnel_id: str
    client_id: str
    tasks: tuple[ChannelTask, ...]
    sink: Sink
    max_records: int
    cutoff_us: int | None = None
    request_timeout: float = 60.0
    max_bytes: int = 256 * 1024 * 1024
    partitions: int = 1
    """Spark tasks of the round (:func:`partition_count`); task ``p`` reads ``tasks[p::partitions]``."""

    def assigned(self, partition: int) -> tuple[ChannelTask, ...]:
        """The channels Spark task ``partition`` reads, in order (every ``partitions``-th channel: a task's
        share is spread over the plan, not a block of it)."""
        return self.tasks[partition::self.partitions]


TASKS_PER_SLOT = 4
"""Default Spark tasks per round per task slot (executor core): enough to even out channels of unequal size
over the slots, few enough that a task's fixed cost (Spark's scheduling, the Python worker's set-up, the
client) is paid once for many channels, not once per channel."""


def partition_count(channels: int, tasks_per_round: int, slots: int) -> int:
    """Spark tasks of a round of ``channels`` channels: ``tasks_per_round`` (``--tasks-per-round``) or, when
    0, :data:`TASKS_PER_SLOT` × ``slots`` (Spark's default parallelism), and never more than the channels."""
    limit = tasks_per_round or TASKS_PER_SLOT * max(1, slots)
    return max(1, min(channels, limit))


def read_channel(client: Any, plan: RoundPlan, task: ChannelTask) -> ChannelResult:
    """Read ``task``'s channel until "finished", the record or byte cap, the cutoff or (stream) the head of the
    log; write every record to the sink; return the control row. Raises if a read or a sink write fails."""
    started = time.perf_counter()
    if task.start_token == FINISHED:  # a previous owner finished it; nothing to read (never ReadRecords "finished")
        return ChannelResult(task.channel_id, task.start_token, task.start_token, finished=True,
                             peak_rss_bytes=peak_rss_bytes())
    writer = plan.sink.open(task.channel_id, task.start_token, task.sequence + 1)
    try:
        token, count, size, reads, max_ts, read_s, sink_s, end = _read_into(client, plan, task, writer)
        t2 = time.perf_counter()
        written = writer.close(token)
        sink_s += time.perf_counter() - t2
    except BaseException:
        writer.abort()  # nothing of this round becomes visible; the round is replayed from start_token
        raise
    if written != count:
        raise RuntimeError(f"sink wrote {written} of {count} records of channel {task.channel_id}")
    return ChannelResult(
        task.channel_id, task.start_token, token, end.finished, records=count, bytes=size, reads=reads,
        max_sequence_timestamp_us=max_ts, reached_cutoff=end.reached_until, caught_up=end.caught_up,
        read_seconds=read_s, sink_seconds=sink_s, task_seconds=time.perf_counter() - started,
        refused=writer.refused, peak_rss_bytes=peak_rss_bytes(),
    )


def _read_into(client: Any, plan: RoundPlan, task: ChannelTask, writer: ChannelWriter
               ) -> tuple[str, int, int, int, int | None, float, float, SpanEnd]:
    """The read loop of :func:`read_channel`: the channel's records in whole answers (the shared read path,
    :class:`~airflow_tablestore.client.tunnel.span.SpanRead`) until "finished", the caps, the cutoff or the head
    of the log; returns (token, records, bytes, reads, newest sequence timestamp, read seconds, sink seconds,
    where and why the span ended)."""
    span = Span(Position(task.start_token), plan.max_records, plan.cutoff_us, task.stream)
    read = SpanRead(client, plan.tunnel_id, plan.client_id, task.channel_id, span, whole_answers=True,
                    max_bytes=plan.max_bytes)
    answers = iter(read)
    count = 0
    read_s = sink_s = 0.0
    max_ts: int | None = None
    while True:
        t0 = time.perf_counter()
        records = next(answers, None)
        t1 = time.perf_counter()
        read_s += t1 - t0
        if records is None:
            break
        writer.write(records)
        sink_s += time.perf_counter() - t1
        count += len(records)
        _, newest = records.scan()  # without decoding (in C), or from the records the sink decoded
        if newest is not None and (max_ts is None or newest > max_ts):
            max_ts = newest
    end = read.end
    assert end is not None
    return end.position.token, count, read.bytes, read.reads, max_ts, read_s, sink_s, end


def peak_rss_bytes() -> int:
    """Peak resident memory of this (Python worker) process so far, in bytes (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def read_channel_isolated(client: Any, plan: RoundPlan, task: ChannelTask) -> ChannelResult:
    """:func:`read_channel`, but a transient failure (network, throttling, timeout, 5xx after the client's
    own retries) becomes a control row with ``error`` set and the start token as next token, so the other
    channels' finished work is still checkpointed and only this channel is replayed. Anything else raises
    (and fails the round: a lost channel, bad credentials, a missing table)."""
    started = time.perf_counter()
    try:
        return read_channel(client, plan, task)
    except Exception as exc:
        if not is_transient(exc):
            raise
        return ChannelResult(
            task.channel_id, task.start_token, task.start_token, finished=False,
            task_seconds=time.perf_counter() - started, peak_rss_bytes=peak_rss_bytes(),
            error=f"{type(exc).__name__}: {exc}"[:500],
        )


def round_function(plan: RoundPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a round: input rows carry an ``id``, the Spark task's partition number
    (:meth:`RoundPlan.assigned`); one client serves all the channels a task reads."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = None
        try:
            for batch in batches:
                for partition in batch.column("id").to_pylist():
                    for task in plan.assigned(int(partition)):
                        if client is None:
                            client = plan.settings.tunnel_client(timeout=plan.request_timeout)
                        yield read_channel_isolated(client, plan, task).to_batch()
        finally:
            if client is not None:
                client.close()

    return run


def run_round_locally(plan: RoundPlan) -> list[ChannelResult]:
    """Run a round without Spark, its partitions one after another (tests, and the TunnelWorker-free
    baseline)."""
    fn = round_function(plan)
    ids = pa.RecordBatch.from_pydict({"id": list(range(plan.partitions))})
    return [ChannelResult.from_row(row) for batch in fn(iter([ids])) for row in batch.to_pylist()]
