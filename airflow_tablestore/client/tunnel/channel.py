"""One channel's consumer: a small state machine WAIT → RUNNING → CLOSING → CLOSED.

A reader thread keeps up to ``read_ahead`` ReadRecords answers queued while the consumer thread processes the
previous batch, strictly in order. Progress is checkpointed every ``checkpoint_interval_s``, on close (the
last fully processed token) and at "finished". Any failure closes the channel; the worker reports it to the
server (CLOSE, or TERMINATED once finished) and whatever was not checkpointed is delivered again — at least
once, order preserved.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from airflow_tablestore.client.backoff import FINISH_CHECKPOINT_RETRY
from airflow_tablestore.client.errors import ResourceGoneError, TablestoreError
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.checkpointer import Checkpointer
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.metrics import WorkerMetrics
from airflow_tablestore.client.tunnel.processor import ChannelContext, ChannelProcessor
from airflow_tablestore.client.tunnel.reads import FINISHED, ReadResult, enough_data
from airflow_tablestore.client.tunnel.session import report_for

log = logging.getLogger(__name__)

THREAD_PREFIX = "tunnel-channel-"
_POLL_S = 0.1


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
        context: ChannelContext,
        channel: Channel,
        token: str,
        sequence_number: int,
        processor: ChannelProcessor | None,
        owns_processor: bool,
        config: TunnelWorkerConfig,
        metrics: WorkerMetrics,
        semaphore: threading.Semaphore | None,
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
        self._semaphore = semaphore
        self._on_closed = on_closed
        self._on_fatal = on_fatal
        self._start_token = token
        self._checkpointer = Checkpointer(client, context.tunnel_id, context.client_id, channel.channel_id,
                                          sequence_number, token)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flush_on_close = True
        self._processor_failed = False
        self._threads: list[threading.Thread] = []
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

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the consumer threads; True when they ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._threads)

    def _start(self) -> None:
        with self._lock:
            if self.state != ConsumerState.WAIT:
                return
            self.state = ConsumerState.RUNNING
        thread = threading.Thread(target=self._run, name=f"{THREAD_PREFIX}{self.channel_id}", daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- consumer thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        last_token = self._start_token
        last_checkpoint = time.monotonic()
        try:
            if not self.finished:
                source = self._queued_batches() if self._config.read_ahead else self._read_batches()
                for item in source:
                    if item is not None:
                        if item.records:
                            self._process(item, last_token)
                        self._metrics.batch(self.channel_id, len(item.records), item.size_bytes,
                                            self._position_us(item))
                        last_token = item.next_token
                    if last_token == FINISHED:
                        self._finish()
                        break
                    if self._stop.is_set():
                        break
                    if time.monotonic() - last_checkpoint >= self._config.checkpoint_interval_s:
                        self._checkpoint(last_token)
                        last_checkpoint = time.monotonic()
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - every failure closes the channel
            self._fail(exc)
        finally:
            self._stop.set()
            if self._flush_on_close and not self.finished and not isinstance(self.error, ResourceGoneError):
                self._final_flush(last_token)
            with self._lock:
                self.state = ConsumerState.CLOSED
            self._retire_processor()
            if not self._processor_failed:
                # Report at once; after a processor failure wait for the regular heartbeat instead, so a
                # poison batch is retried at the heartbeat pace (like the SDKs), not in a tight loop.
                self._on_closed()

    def _queued_batches(self) -> Iterator[ReadResult | None]:
        """Batches from the read-ahead thread; None when nothing arrived within a poll interval."""
        batches: queue.Queue[ReadResult | BaseException] = queue.Queue(maxsize=self._config.read_ahead)
        reader = threading.Thread(target=self._read_loop, args=(batches,), daemon=True,
                                  name=f"tunnel-reader-{self.channel_id}")
        self._threads.append(reader)
        reader.start()
        while True:
            try:
                item = batches.get(timeout=_POLL_S)
            except queue.Empty:
                yield None
                continue
            if isinstance(item, BaseException):
                raise item
            yield item

    def _read_batches(self) -> Iterator[ReadResult | None]:
        """``read_ahead=0``: read in the consumer thread itself (no hand-off between threads)."""
        ctx = self.context
        token = self._start_token
        empty_reads = 0
        backoff = self._config.empty_read_backoff
        while not self._stop.is_set():
            result = self._client.read_records(ctx.tunnel_id, ctx.client_id, ctx.channel_id, token)
            yield result
            if result.next_token == FINISHED:
                return
            token = result.next_token
            if self.is_stream and not enough_data(result):
                if self._stop.wait(backoff.delay(empty_reads)):
                    return
                empty_reads += 1
            else:
                empty_reads = 0

    def _process(self, batch: ReadResult, start_token: str) -> None:
        assert self._processor is not None
        ctx = self.context._replace(start_token=start_token, next_token=batch.next_token)
        sem = self._semaphore
        if sem is not None:
            while not sem.acquire(timeout=_POLL_S):
                if self._stop.is_set():
                    raise _Stop()
        try:
            self._processor.process(batch.records, ctx)
        except BaseException:
            self._processor_failed = True  # user code: never mistaken for a tunnel (fatal) error
            raise
        finally:
            if sem is not None:
                sem.release()

    def _finish(self) -> None:
        for attempt in range(5):
            try:
                if self._checkpointer.checkpoint(FINISHED):
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
        if token != self._checkpointer.last_token and self._checkpointer.checkpoint(token):
            self._metrics.add("checkpoints")

    def _final_flush(self, token: str) -> None:
        try:
            if token == FINISHED:
                if self._checkpointer.checkpoint(FINISHED):
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

    # -- reader thread ------------------------------------------------------------------------------
    def _read_loop(self, out: queue.Queue[ReadResult | BaseException]) -> None:
        try:
            for result in self._read_batches():
                if result is not None:
                    self._put(out, result)
        except _Stop:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
            try:
                self._put(out, exc)
            except _Stop:
                return

    def _put(self, out: queue.Queue[ReadResult | BaseException], item: ReadResult | BaseException) -> None:
        while True:
            try:
                out.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                if self._stop.is_set():
                    raise _Stop() from None


def new_trace_id() -> str:
    return uuid.uuid4().hex[:12]
