"""One owned shard: a small state machine run step by step on the worker's thread pool.

WAITING (parents not finished) → INITIALIZING (checkpoint → iterator, ``processor.initialize``) → PROCESSING
(GetStreamRecord → ``process_records``) → DONE (``processor.shutdown(reason)``; lease released, finished or
lost). Each :meth:`ShardConsumer.step` does one unit of work and says when it wants the next one.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from airflow_tablestore.client.backoff import Backoff
from airflow_tablestore.client.errors import NotFoundError, TablestoreError, TrimmedDataError
from airflow_tablestore.client.model import Record
from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.client.stream.config import StreamWorkerConfig
from airflow_tablestore.client.stream.lease import (
    SHARD_END,
    TRIM_HORIZON,
    Lease,
    LeaseLostError,
    LeaseManager,
)
from airflow_tablestore.client.stream.metrics import StreamWorkerMetrics
from airflow_tablestore.client.stream.processor import RecordProcessor, ShardInfo, ShutdownReason

log = logging.getLogger(__name__)

TS_PREFIX = "TS:"


class ShardState(enum.StrEnum):
    WAITING = "WAITING"
    INITIALIZING = "INITIALIZING"
    PROCESSING = "PROCESSING"
    DONE = "DONE"


def record_point(record: Record) -> str:
    """The checkpoint value "just after ``record``"."""
    if record.sequence is None:
        raise ValueError("only stream records (with sequence info) can be checkpointed")
    return f"{TS_PREFIX}{record.sequence.timestamp}:{record.sequence.row_index}"


def parse_record_point(value: str) -> tuple[int, int]:
    ts, row_index = value[len(TS_PREFIX):].split(":")
    return int(ts), int(row_index)


class LeaseHolder:
    """The lease we own, with a lock so renewals (coordinator) and checkpoints (shard thread) serialise."""

    def __init__(self, manager: LeaseManager, lease: Lease) -> None:
        self.manager = manager
        self._lease = lease
        self._lock = threading.Lock()
        self.lost = False
        self.released = False  # handed over or freed: no more writes (a late renewal would bump the new
        # owner's counter and make *its* next renewal fail)
        self.handoff_to = ""

    @property
    def lease(self) -> Lease:
        with self._lock:
            return self._lease

    def _apply(self, op: Callable[[Lease], Lease], *, releases: bool = False) -> Lease:
        with self._lock:
            if self.lost:
                raise LeaseLostError(f"lease of shard {self._lease.shard_id} is lost")
            if self.released:
                return self._lease  # no longer ours: writing would disturb the new owner's lease
            try:
                self._lease = op(self._lease)
            except LeaseLostError:
                self.lost = True
                raise
            self.released = releases
            return self._lease

    def note_stealer(self, stealer: str) -> None:
        """Remember the worker that asked for the lease: :meth:`release` hands it over to it."""
        with self._lock:
            self.handoff_to = stealer

    @staticmethod
    def renew_all(manager: LeaseManager, holders: Sequence[LeaseHolder]) -> list[LeaseHolder]:
        """Renew the leases of ``holders`` (in batches, each under its holder's lock, so a shard's checkpoint
        waits for its renewal); returns the holders whose lease was lost. A row that failed otherwise keeps
        its lease for the next renewal (logged)."""
        with ExitStack() as locks:
            for holder in holders:
                locks.enter_context(holder._lock)
            live = [holder for holder in holders if not holder.lost and not holder.released]
            lost = []
            for holder, outcome in zip(live, manager.renew_all([h._lease for h in live]), strict=True):
                if isinstance(outcome, Lease):
                    holder._lease = outcome
                elif outcome is None:
                    holder.lost = True
                    lost.append(holder)
                else:
                    log.warning("shard %s: lease renewal failed (%s); retrying next tick",
                                holder._lease.shard_id, outcome)
            return lost

    def checkpoint(self, value: str) -> Lease:
        return self._apply(lambda lease: self.manager.checkpoint(lease, value))

    def release(self) -> Lease:
        return self._apply(
            lambda lease: self.manager.release(lease, self._current_stealer(lease)), releases=True
        )

    def _current_stealer(self, lease: Lease) -> str:
        """The stealer still asking for the lease right now (a worker may have withdrawn at its shutdown)."""
        if not self.handoff_to:
            return ""
        fresh = self.manager.get(lease.stream_id, lease.shard_id)
        if fresh is None or fresh.stealer in ("", lease.owner):
            return ""
        return fresh.stealer


class ShardCheckpointer:
    """The :class:`~.processor.Checkpointer` handed to a shard's processor."""

    def __init__(self, consumer: ShardConsumer) -> None:
        self._c = consumer
        self.count = 0

    def checkpoint(self, point: Record | str | None = None) -> None:
        c = self._c
        if c.shutdown_reason is ShutdownReason.LEASE_LOST:
            raise LeaseLostError(f"shard {c.shard_id}: the lease is lost, checkpoint refused")
        if point is None:
            if c.shutdown_reason is ShutdownReason.TERMINATE:
                value = SHARD_END
            elif c.batch_next_iterator is not None:
                value = c.batch_next_iterator
            elif c.last_record is not None:
                value = record_point(c.last_record)
            else:
                return  # nothing delivered yet
        elif isinstance(point, Record):
            seq, last = point.sequence, c.last_record
            if seq is None or last is None or last.sequence is None or \
                    (seq.timestamp, seq.row_index) > (last.sequence.timestamp, last.sequence.row_index):
                raise ValueError("checkpoint(record): the record was not delivered by this shard yet")
            value = record_point(point)
        elif isinstance(point, str) and point:
            if point == SHARD_END and c.shutdown_reason is not ShutdownReason.TERMINATE:
                raise ValueError("SHARD_END may only be checkpointed at shutdown(TERMINATE)")
            value = point
        else:
            raise ValueError(f"bad checkpoint point {point!r}")
        c.holder.checkpoint(value)
        self.count += 1
        c.metrics.add("checkpoints")


class ShardConsumer:
    """Consumes one owned shard with one processor."""

    def __init__(self, *, client: StreamClient, holder: LeaseHolder, processor: RecordProcessor,
                 info: ShardInfo, config: StreamWorkerConfig, metrics: StreamWorkerMetrics,
                 shard_exists: Callable[[str], bool]) -> None:
        self.client = client
        self.holder = holder
        self.processor = processor
        self.info = info
        self.config = config
        self.metrics = metrics
        self._shard_exists = shard_exists
        self.shard_id = info.shard_id
        self.state = ShardState.WAITING
        self.parents_done = False
        self.shutdown_reason: ShutdownReason | None = None
        self._requested: ShutdownReason | None = None
        self._initialized = False
        self._iterator: str | None = None
        self._skip_until: tuple[int, int] | None = None
        self._failures = 0
        self.batch_next_iterator: str | None = None
        self.last_record: Record | None = None
        self.busy = False
        self.due = 0.0

    def __repr__(self) -> str:
        return f"ShardConsumer(shard={self.shard_id!r}, state={self.state.value})"

    def request_shutdown(self, reason: ShutdownReason) -> None:
        """Ask the consumer to stop at its next step (REQUESTED: give the lease up; LEASE_LOST: it is
        gone)."""
        if self._requested is None or reason is ShutdownReason.LEASE_LOST:
            self._requested = reason

    @property
    def done(self) -> bool:
        return self.state is ShardState.DONE

    # -- one step -----------------------------------------------------------------------------------
    def step(self) -> float | None:
        """Do one unit of work; returns the delay before the next step, None when done."""
        if self.state is ShardState.DONE:
            return None
        if self.holder.lost and self._requested is None:
            self._requested = ShutdownReason.LEASE_LOST
        if self._requested is not None:
            self._finish(self._requested)
            return None
        try:
            if self.state is ShardState.WAITING:
                if not self.parents_done:
                    return self.config.idle_poll_s
                self.state = ShardState.INITIALIZING
            if self.state is ShardState.INITIALIZING:
                return self._initialize()
            return self._fetch_and_process()
        except LeaseLostError:
            self._finish(ShutdownReason.LEASE_LOST)
            return None
        except TablestoreError as exc:
            self._failures += 1
            delay = self._backoff()
            log.warning("shard %s: %s; retrying in %.2fs", self.shard_id, exc, delay)
            return delay

    def _backoff(self) -> float:
        low, high = self.config.processor_retry_s
        return Backoff(base_s=low, factor=2.0, jitter=0.0, max_s=high).delay(self._failures - 1)

    def _initialize(self) -> float:
        checkpoint = self.holder.lease.checkpoint
        try:
            self._iterator = self._resolve(checkpoint)
        except TrimmedDataError:
            self._restart_at_oldest()
        except NotFoundError:
            if self._shard_exists(self.shard_id):
                raise
            log.warning("shard %s no longer exists in the stream (expired); finishing it", self.shard_id)
            self._iterator = None
        if not self._initialized:
            self.processor.initialize(self.info._replace(checkpoint=checkpoint))
            self._initialized = True
        self.state = ShardState.PROCESSING
        if self._iterator is None:
            self._finish(ShutdownReason.TERMINATE)
        return 0.0

    def _resolve(self, checkpoint: str) -> str:
        sid = self.info.stream_id
        if checkpoint == TRIM_HORIZON:
            return self.client.get_shard_iterator(sid, self.shard_id)
        if checkpoint.startswith(TS_PREFIX):
            self._skip_until = parse_record_point(checkpoint)
            return self.client.get_shard_iterator(sid, self.shard_id, timestamp_us=self._skip_until[0])
        return checkpoint

    def _restart_at_oldest(self) -> None:
        self.metrics.add("trimmed_restarts")
        log.warning("shard %s: position %s is trimmed by the stream retention; restarting at the oldest "
                    "retained record (records in between were lost)", self.shard_id,
                    self.holder.lease.checkpoint[:24])
        self._skip_until = None
        self._iterator = self.client.get_shard_iterator(self.info.stream_id, self.shard_id)

    def _fetch_and_process(self) -> float | None:
        assert self._iterator is not None
        try:
            result = self.client.get_stream_records(self._iterator, self.config.fetch_limit)
        except TrimmedDataError:
            self._restart_at_oldest()
            return 0.0
        records = result.records
        if self._skip_until is not None and records:
            bound = self._skip_until
            records = [r for r in records if r.sequence is None
                       or (r.sequence.timestamp, r.sequence.row_index) > bound]
            if records or result.next_iterator is None:
                self._skip_until = None
        previous_next, previous_last = self.batch_next_iterator, self.last_record
        if result.next_iterator is not None or records:
            self.batch_next_iterator = (
                result.next_iterator
            )  # None: last batch of a closed shard → record point
        if records:
            self.last_record = records[-1]
            try:
                self.processor.process_records(records, ShardCheckpointer(self))
            except LeaseLostError:
                raise
            except Exception:  # noqa: BLE001 - a processor bug must not kill the worker; batch is re-delivered
                self._failures += 1
                self.metrics.add("processor_errors")
                self.batch_next_iterator, self.last_record = previous_next, previous_last
                delay = self._backoff()
                log.exception("shard %s: process_records raised; the same batch is delivered again in %.2fs",
                              self.shard_id, delay)
                return delay
            self._failures = 0
            self.metrics.add("records", len(records))
            self.metrics.add("batches")
        self._iterator = result.next_iterator
        if self._iterator is None:
            self._finish(ShutdownReason.TERMINATE)
            return None
        return 0.0 if (records or result.may_more) else self.config.idle_poll_s

    def _finish(self, reason: ShutdownReason) -> None:
        self.shutdown_reason = reason
        if self._initialized:
            try:
                self.processor.shutdown(reason, ShardCheckpointer(self))
            except Exception:  # noqa: BLE001 - logged; the lease state below decides what happens next
                log.exception("shard %s: processor.shutdown(%s) raised", self.shard_id, reason.value)
        lease = self.holder.lease
        if reason is ShutdownReason.TERMINATE:
            if lease.finished:
                self.metrics.add("shards_finished")
                log.info("shard %s fully consumed", self.shard_id)
            else:
                log.warning(
                    "shard %s: closed and drained but the processor did not checkpoint at TERMINATE; it "
                    "will be delivered again from its checkpoint",
                    self.shard_id,
                )
                self._release()
        elif reason is ShutdownReason.REQUESTED:
            self._release()
        else:
            self.metrics.add("leases_lost")
            log.warning("shard %s: lease lost", self.shard_id)
        self.state = ShardState.DONE

    def _release(self) -> None:
        if self.holder.lost or self.holder.lease.finished:
            return
        try:
            released = self.holder.release()
            log.info("shard %s: lease released to %r", self.shard_id, released.owner or "anyone")
        except TablestoreError as exc:
            log.warning("shard %s: could not release the lease (%s); it will expire", self.shard_id, exc)

