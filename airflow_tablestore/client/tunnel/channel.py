"""One channel's consumer: a small state machine WAIT → RUNNING → CLOSING → CLOSED.

The consumer holds no thread of its own: its ReadRecords calls run on the worker's read pool and its batches on
the process pool (:class:`~airflow_tablestore.client.tunnel.pools.ChannelPools`), one read and one process step
at a time, so up to ``read_ahead`` answers are read ahead while the previous batch is processed, strictly in
order. Progress is checkpointed every ``checkpoint_interval_s``, on close (the
last fully processed token) and at "finished", through the worker's :class:`~.session.TunnelSession` (the
sequence rule: each checkpoint takes the next number; when someone else moved the channel's number, ours is
not re-sent, the next checkpoint continues from theirs). Any failure closes the channel; the worker reports it to the
server (CLOSE, or TERMINATED once finished) and whatever was not checkpointed is delivered again — at least
once, order preserved.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable

from airflow_tablestore.client.backoff import FINISH_CHECKPOINT_RETRY
from airflow_tablestore.client.errors import ResourceGoneError, TablestoreError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.metrics import WorkerMetrics
from airflow_tablestore.client.tunnel.pools import THREAD_PREFIX, ChannelPools
from airflow_tablestore.client.tunnel.processor import ChannelContext, ChannelProcessor
from airflow_tablestore.client.tunnel.reads import FINISHED, ReadResult, enough_data
from airflow_tablestore.client.tunnel.session import CheckpointOutcome, TunnelSession, report_for

log = logging.getLogger(__name__)

__all__ = ["THREAD_PREFIX", "ChannelConsumer", "ConsumerState", "new_trace_id"]


class ConsumerState(enum.Enum):
    WAIT = "WAIT"
    RUNNING = "RUNNING"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


class _Stop(Exception):
    """Internal: the consumer was asked to stop while waiting."""


class ChannelConsumer:
    """The tunnel worker's state machine for one channel (reads, hands batches to the processor, checkpoints).

    Consumes one channel for one worker session. Driven by the worker's heartbeat thread via
    :meth:`notify`; reports its own transition through :meth:`report`."""

    def __init__(
        self,
        *,
        client: TunnelClient,
        session: TunnelSession,
        context: ChannelContext,
        channel: Channel,
        token: str,
        sequence_number: int,
        processor: ChannelProcessor | None,
        owns_processor: bool,
        config: TunnelWorkerConfig,
        metrics: WorkerMetrics,
        pools: ChannelPools,
        on_closed: Callable[[], None],
        on_fatal: Callable[[BaseException], None],
        failed: BaseException | None = None,
    ) -> None:
        self.channel_id = channel.channel_id
        self.context = context
        self._client = client
        self._processor = processor
        self._owns_processor = owns_processor
        self._config = config
        self._metrics = metrics
        self._pools = pools
        self._on_closed = on_closed
        self._on_fatal = on_fatal
        self._start_token = token
        self._session = session
        self._next_sequence = sequence_number + 1
        self._checkpointed = token
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flush_on_close = True
        self._processor_failed = False
        self._idle = threading.Condition(self._lock)
        self._started = False
        # the read side: one ReadRecords in flight at most, answers buffered in order for the process side
        self._reading = False
        self._awaiting_budget = False
        self._backing_off = False
        self._read_token = token
        self._read_done = token == FINISHED
        self._read_error: BaseException | None = None
        self._read_delay = 0.0
        self._empty_reads = 0
        self._buffer: deque[ReadResult] = deque()
        # the process side: one step queued or running at most
        self._processing = False
        self._last_token = token
        self._last_checkpoint = time.monotonic()
        self.version_seen = channel.version
        self.reported: Channel | None = None
        self.finished = token == FINISHED
        self.error: BaseException | None = failed
        self.state = ConsumerState.CLOSED if failed is not None else ConsumerState.WAIT
        self.is_stream = context.channel_type == "Stream"

    def __repr__(self) -> str:
        return f"ChannelConsumer({self.channel_id}, {self.state.value}, finished={self.finished})"

    # -- driven by the heartbeat thread -------------------------------------------------------------
    def notify(self, channel: Channel) -> None:
        """Apply the server's view of the channel (ignored if older than what we saw)."""
        if channel.version < self.version_seen:
            return
        self.version_seen = channel.version
        if channel.status == ChannelStatus.OPEN:
            self._start()
        elif channel.status == ChannelStatus.CLOSING:
            self.stop()
        else:  # CLOSE / TERMINATED: no longer ours, nothing to flush
            self.stop(flush=False)

    def report(self) -> Channel | None:
        """Once closed: the transition to send (version + 1; TERMINATED if finished else CLOSE). Sent again
        only if the server still shows the channel at a version ≥ our report (it bumped concurrently, e.g.
        OPEN → CLOSING, and ignored ours)."""
        with self._lock:
            if self.state != ConsumerState.CLOSED:
                return None
            if self.reported is not None and self.version_seen < self.reported.version:
                return None
            # A closed consumer gives its channel back: TERMINATED when finished, else CLOSE.
            self.reported = report_for(Channel(self.channel_id, self.version_seen, ChannelStatus.OPEN),
                                       finished=self.finished, release=True)
            return self.reported

    def superseded_by(self, channel: Channel) -> bool:
        """True when the server re-opened the channel for us after our report: a fresh consumer is needed."""
        return (self.reported is not None and channel.version > self.reported.version
                and channel.status == ChannelStatus.OPEN)

    def stop(self, *, flush: bool = True) -> None:
        """Ask the consumer to stop (CLOSING). ``flush=False`` skips the final checkpoint."""
        with self._lock:
            if not flush:
                self._flush_on_close = False
            self._stop.set()
            if self.state == ConsumerState.WAIT:
                self.state = ConsumerState.CLOSED
                closed_now = True
            else:
                if self.state == ConsumerState.RUNNING:
                    self.state = ConsumerState.CLOSING
                closed_now = False
        if closed_now:
            self._retire_processor()
            self._on_closed()
        else:
            self._kick_process()  # the process side closes the channel (final checkpoint) once it is free

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the consumer closed (final checkpoint taken) and its read came back; True when so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._busy():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def busy(self) -> bool:
        """True while a task of this consumer is queued or running on the pools."""
        with self._lock:
            return self._busy()

    def _busy(self) -> bool:
        return self._reading or self._processing or (self.state != ConsumerState.CLOSED and self._started)

    def _start(self) -> None:
        with self._lock:
            if self.state != ConsumerState.WAIT:
                return
            self.state = ConsumerState.RUNNING
            self._started = True
        if self.finished:
            self._kick_process()
        else:
            self._maybe_read()

    # -- the read side (read pool) ------------------------------------------------------------------
    def _maybe_read(self) -> None:
        """Start the next ReadRecords when this channel may hold another answer: after the empty-read back-off
        (on the timer), then with an answer slot of the budget (or queued for one)."""
        with self._lock:
            if not self._may_read():
                return
            if self._read_delay > 0:
                delay, self._read_delay = self._read_delay, 0.0
                self._backing_off = True
                self._pools.later(delay, self._after_backoff)
                return
            if not self._pools.try_hold(self._slot_granted):
                self._awaiting_budget = True
                return
            self._reading = True
        self._pools.read(self._read_step)

    def _may_read(self) -> bool:
        return not (self._reading or self._backing_off or self._awaiting_budget or self._read_done
                    or self._stop.is_set() or len(self._buffer) + self._processing > self._config.read_ahead)

    def _after_backoff(self) -> None:
        with self._lock:
            self._backing_off = False
        self._maybe_read()

    def _slot_granted(self) -> None:
        """The budget handed this channel an answer slot: read with it, or give it back."""
        with self._lock:
            self._awaiting_budget = False
            start = self._may_read()
            self._reading = start
        if start:
            self._pools.read(self._read_step)
        else:
            self._pools.release()

    def _read_step(self) -> None:
        ctx = self.context
        result: ReadResult | None = None
        error: BaseException | None = None
        if not self._stop.is_set():
            try:
                result = self._client.read_records(ctx.tunnel_id, ctx.client_id, ctx.channel_id, self._read_token)
                result.records.decode()  # here, on the I/O side: a corrupt answer fails the read, not the processor
            except BaseException as exc:  # noqa: BLE001 - handed to the process side, which closes the channel
                error = exc
        with self._lock:
            self._reading = False
            if result is None or self._stop.is_set():
                if error is not None:
                    self._read_error, self._read_done = error, True
                keep = False
            else:
                self._buffer.append(result)
                self._read_token = result.next_token
                self._read_done = result.next_token == FINISHED
                if self.is_stream and not enough_data(result):
                    self._read_delay = self._config.empty_read_backoff.delay(self._empty_reads)
                    self._empty_reads += 1
                else:
                    self._empty_reads = 0
                keep = True
            self._idle.notify_all()
        if not keep:
            self._pools.release()
        self._kick_process()
        self._maybe_read()

    # -- the process side (process pool) ------------------------------------------------------------
    def _kick_process(self) -> None:
        """Queue one process step unless one is queued or running already."""
        with self._lock:
            if self._processing or self.state == ConsumerState.CLOSED:
                return
            if not (self._buffer or self._read_error is not None or self._stop.is_set() or self.finished):
                return
            self._processing = True
        self._pools.process(self._process_step)

    def _process_step(self) -> None:
        """Process one buffered batch (strictly in order), or close the channel when it is done."""
        close = False
        try:
            with self._lock:
                batch = self._buffer.popleft() if self._buffer and not self._stop.is_set() else None
                read_error = self._read_error
            if batch is not None:
                self._maybe_read()  # read ahead while this batch is processed
                try:
                    self._take(batch)
                finally:
                    self._pools.release()  # the answer's slot is held until it is processed
                close = self._last_token == FINISHED or self._stop.is_set()
            elif read_error is not None:
                raise read_error
            else:
                close = self._stop.is_set() or self.finished
        except _Stop:
            close = True
        except BaseException as exc:  # noqa: BLE001 - every failure closes the channel
            self._fail(exc)
            close = True
        if close:
            self._close()
            return
        with self._lock:
            self._processing = False
            self._idle.notify_all()
        self._maybe_read()  # read_ahead=0: the next read waits for the end of this step
        self._kick_process()

    def _take(self, batch: ReadResult) -> None:
        if batch.records:
            self._process(batch, self._last_token)
        self._metrics.batch(self.channel_id, len(batch.records), batch.size_bytes, self._position_us(batch))
        self._last_token = batch.next_token
        if self._last_token == FINISHED:
            self._finish()
        elif time.monotonic() - self._last_checkpoint >= self._config.checkpoint_interval_s:
            self._checkpoint(self._last_token)
            self._last_checkpoint = time.monotonic()

    def _close(self) -> None:
        """The consumer's end: the final checkpoint, CLOSED, the processor retired, the worker told."""
        self._stop.set()
        try:
            if self._flush_on_close and not self.finished and not isinstance(self.error, ResourceGoneError):
                self._final_flush(self._last_token)
        except Exception:  # noqa: BLE001 - whatever the flush raised, the channel must reach CLOSED
            log.exception("channel %s: final checkpoint failed", self.channel_id)
        with self._lock:
            dropped = len(self._buffer)
            self._buffer.clear()
        for _ in range(dropped):
            self._pools.release()
        # Retired before CLOSED: join() and the report wait for the processor's shutdown (a sink's flush).
        self._retire_processor()
        with self._lock:
            self.state = ConsumerState.CLOSED
            self._processing = False
            self._idle.notify_all()
        if not self._processor_failed:
            # Report at once; after a processor failure wait for the regular heartbeat instead, so a
            # poison batch is retried at the heartbeat pace (like the SDKs), not in a tight loop.
            self._on_closed()

    def _process(self, batch: ReadResult, start_token: str) -> None:
        assert self._processor is not None
        ctx = self.context._replace(start_token=start_token, next_token=batch.next_token)
        try:
            self._processor.process(batch.records.decode(), ctx)  # decoded on read: the list as it was made
        except BaseException:
            self._processor_failed = True  # user code: never mistaken for a tunnel (fatal) error
            raise

    def _finish(self) -> None:
        for attempt in range(5):
            try:
                if self._store(FINISHED):
                    self._metrics.add("checkpoints")
                    self.finished = True
                    log.info("channel %s finished", self.channel_id)
                    return
            except ResourceGoneError:
                raise
            if self._stop.wait(FINISH_CHECKPOINT_RETRY.delay(attempt)):
                raise _Stop()
        raise TablestoreError(
            "OTSClientError", f"could not checkpoint 'finished' for channel {self.channel_id}"
        )

    def _checkpoint(self, token: str) -> None:
        if token != self._checkpointed and self._store(token):
            self._metrics.add("checkpoints")

    def _store(self, token: str) -> bool:
        """Checkpoint ``token`` under the next sequence number; True when stored (or already). A failure is
        logged (the next checkpoint supersedes it); ``ResourceGoneError`` propagates: the channel is not ours."""
        if token == self._checkpointed:
            return True
        try:
            result = self._session.store(self.channel_id, token, self._next_sequence)
        except TablestoreError as exc:
            log.warning("channel %s: checkpoint failed (%s); will retry with the next one", self.channel_id, exc)
            return False
        if result.error is not None:  # GONE: the channel is no longer ours
            raise result.error
        if result.outcome is CheckpointOutcome.MOVED:
            log.warning("channel %s: checkpoint sequence number %d out of date, server has %d; resynced",
                        self.channel_id, self._next_sequence, result.stored_sequence)
            self._next_sequence = result.stored_sequence + 1
            return False
        self._next_sequence += 1
        self._checkpointed = token
        return True

    def _final_flush(self, token: str) -> None:
        try:
            if token == FINISHED:
                if self._store(FINISHED):
                    self.finished = True
                return
            self._checkpoint(token)
        except TablestoreError as exc:
            log.warning("channel %s: final checkpoint failed (%s); data after the previous checkpoint "
                        "will be delivered again", self.channel_id, exc)

    def _fail(self, exc: BaseException) -> None:
        self.error = exc
        self._metrics.add("channel_errors")
        if isinstance(exc, TablestoreError) and not self._processor_failed:
            log.warning("channel %s closed after an error: %s", self.channel_id, exc)
            self._on_fatal(exc)
        else:
            log.error("channel %s: processor failed; closing the channel, records after the last "
                      "checkpoint will be delivered again", self.channel_id, exc_info=exc)

    def _retire_processor(self) -> None:
        processor, self._processor = self._processor, None
        if processor is not None and self._owns_processor:
            try:
                processor.shutdown()
            except Exception:  # noqa: BLE001
                log.exception("channel %s: processor shutdown failed", self.channel_id)

    def _position_us(self, batch: ReadResult) -> int | None:
        """Stream position reached: the last record's sequence time, or "now" when a stream channel is idle
        at the head of its log (nothing more to read means no lag)."""
        if batch.records:
            seq = batch.records[-1].sequence
            return seq.timestamp if seq is not None else None
        if self.is_stream and not enough_data(batch):
            return int(time.time() * 1_000_000)
        return None


def new_trace_id() -> str:
    return uuid.uuid4().hex[:12]
