"""``TunnelWorker``: consume a whole tunnel with a user processor — the Python Java/Go tunnel worker.

One heartbeat thread owns the :class:`~.session.TunnelSession`: connect, heartbeat every interval (and right
after a channel closes), merge channel states by version, start/stop one :class:`ChannelConsumer` per assigned
channel. The consumers run on the worker's :class:`ChannelPools` (a read pool, a process pool, a timer and a
buffered-answers budget), so threads and memory are fixed by the configuration, not by the number of channels.
The session decides what a failure means: a lost session (``OTSResourceGone``, or no successful heartbeat for
``heartbeat_timeout_s``) closes the consumers and reconnects with a new client id after a random back-off, like
the Go SDK's daemon; a fatal error (the tunnel expired or was deleted, a permission: ``RetryPolicy.is_permanent``)
stops the worker with :class:`TunnelWorkerError`.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

from airflow_tablestore.client.backoff import spread
from airflow_tablestore.client.errors import (
    AuthError,
    InvalidParameterError,
    ResourceGoneError,
    TablestoreError,
    TunnelExpiredError,
    TunnelNotFoundError,
)
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel.channel import (
    THREAD_PREFIX,
    ChannelConsumer,
    ConsumerState,
    new_trace_id,
)
from airflow_tablestore.client.tunnel.client import Channel, TunnelClient
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.metrics import MetricsSnapshot, WorkerMetrics
from airflow_tablestore.client.tunnel.pools import ChannelPools
from airflow_tablestore.client.tunnel.processor import (
    ChannelContext,
    ChannelProcessor,
    ProcessorFactory,
)
from airflow_tablestore.client.tunnel.reads import FINISHED, is_stream_token
from airflow_tablestore.client.tunnel.session import SessionLostError, TunnelSession, merge_channels

log = logging.getLogger(__name__)

MIN_HEARTBEAT_GAP_S = 1.0


class TunnelWorkerError(TablestoreError):
    """The worker stopped for good; ``cause`` is the service error. The message says what to do."""

    def __init__(self, code: str, message: str, http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(code, message, http_status, request_id)


def _advice(exc: TablestoreError) -> str:
    if isinstance(exc, TunnelExpiredError):
        return ("the tunnel's stream position fell out of the stream log retention; delete the tunnel and "
                "create it again (this restarts with a full base-data copy)")
    if isinstance(exc, TunnelNotFoundError):
        return "the tunnel does not exist (deleted?); create it or fix the tunnel id"
    if isinstance(exc, InvalidParameterError):
        return "the service rejected a parameter; check the tunnel id and the worker configuration"
    if isinstance(exc, AuthError):
        return ("the AccessKey is refused or has no permission on this tunnel/table; fix the credentials or grant "
                "it (RAM policy) and restart the worker")
    return "no retry can fix this; fix the cause and restart the worker"


class TunnelWorker:
    """Consume tunnel ``tunnel_id`` with ``processor``.

    ``processor`` is either one :class:`ChannelProcessor` shared by all channels (called concurrently from
    channel threads) or a factory ``f(context) -> ChannelProcessor`` called once per channel consumer.
    Use :meth:`run` (blocking) or :meth:`start`/:meth:`join`; :meth:`shutdown` stops gracefully
    (checkpoints, then the Shutdown RPC). Works as a context manager (start / shutdown).
    """

    def __init__(
        self,
        client: TunnelClient,
        tunnel_id: str,
        processor: ChannelProcessor | ProcessorFactory,
        config: TunnelWorkerConfig | None = None,
    ) -> None:
        self.client = client
        self.tunnel_id = tunnel_id
        self.config = config or TunnelWorkerConfig()
        self._shared: ChannelProcessor | None = None
        self._factory: ProcessorFactory | None = None
        if isinstance(processor, ChannelProcessor):
            self._shared = processor
        elif callable(processor):
            self._factory = processor
        else:
            raise TypeError("processor must be a ChannelProcessor or a callable factory(context)")
        self._metrics = WorkerMetrics()
        self._pools: ChannelPools | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        # Open channels at the last heartbeat, less those closed since: whether a close leaves room for more.
        self._open_at_beat = 0
        self._closed_since_beat = 0
        self._closes_lock = threading.Lock()
        self._graceful = True
        self._lock = threading.Lock()
        self._consumers: dict[str, ChannelConsumer] = {}
        self._channels: dict[str, Channel] = {}
        self._retired: list[ChannelConsumer] = []
        self._fatal: TunnelWorkerError | None = None
        self._thread: threading.Thread | None = None
        self.session = TunnelSession(client, tunnel_id, client_timeout_s=self.config.heartbeat_timeout_s,
                                     client_tag=self.config.client_tag)

    def __repr__(self) -> str:
        return f"TunnelWorker(tunnel_id={self.tunnel_id!r}, client_id={self.client_id!r})"

    @property
    def client_id(self) -> str | None:
        """The current session's client id (None between sessions)."""
        return self.session.client_id or None

    # -- public API ---------------------------------------------------------------------------------
    @property
    def metrics(self) -> MetricsSnapshot:
        """Current counters (channels owned, records, bytes, checkpoints, lag)."""
        return self._metrics.snapshot()

    @property
    def error(self) -> TunnelWorkerError | None:
        """The fatal error that stopped the worker, if any."""
        return self._fatal

    def owned_channels(self) -> list[str]:
        """Ids of the channels this worker is consuming right now."""
        with self._lock:
            return sorted(cid for cid, c in self._consumers.items()
                          if c.state in (ConsumerState.WAIT, ConsumerState.RUNNING))

    def run(self) -> None:
        """Consume until :meth:`shutdown` (or a fatal error, raised as :class:`TunnelWorkerError`)."""
        self._pools = ChannelPools(read_threads=self.config.read_threads,
                                   process_threads=self.config.max_channel_parallel,
                                   max_buffered_answers=self.config.max_buffered_answers)
        try:
            while not self._stop.is_set():
                try:
                    self._session()
                except SessionLostError as exc:
                    self._metrics.add("reconnects")
                    delay = spread(*self.config.reconnect_backoff_s)
                    log.warning(
                        "tunnel %s: session lost (%s); reconnecting in %.1fs", self.tunnel_id, exc, delay
                    )
                    self._stop.wait(delay)
        finally:
            self._pools.close()
            if self._shared is not None:
                try:
                    self._shared.shutdown()
                except Exception:  # noqa: BLE001
                    log.exception("processor shutdown failed")
        if self._fatal is not None:
            raise self._fatal

    def start(self) -> TunnelWorker:
        """Run in a background thread."""
        if self._thread is not None:
            raise RuntimeError("worker already started")
        self._thread = threading.Thread(target=self._run_quietly, name=f"tunnel-worker-{self.tunnel_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait for the background thread; re-raises the fatal error if the worker stopped on one."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._fatal is not None:
            raise self._fatal

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def shutdown(self, *, graceful: bool = True, timeout: float | None = 60.0) -> None:
        """Stop: consumers checkpoint their last processed token, then the client leaves (Shutdown RPC).
        ``graceful=False`` just stops the threads (no checkpoint flush, no Shutdown) — it simulates a crash,
        for tests; the server reassigns the channels after the heartbeat timeout."""
        self._graceful = graceful
        self._stop.set()
        self._wake.set()
        current = threading.current_thread()
        # From inside a processor (a channel thread) just signal: joining would wait for ourselves.
        if (self._thread is not None and self._thread is not current
                and not current.name.startswith(THREAD_PREFIX)):
            self._thread.join(timeout)

    def __enter__(self) -> TunnelWorker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    # -- session ------------------------------------------------------------------------------------
    def _run_quietly(self) -> None:
        try:
            self.run()
        except TunnelWorkerError:
            pass  # kept in self._fatal, re-raised by join()
        except Exception:  # noqa: BLE001
            log.exception("tunnel worker crashed")

    def _raise_fatal(self, exc: TablestoreError) -> None:
        if self._fatal is None:
            self._fatal = TunnelWorkerError(
                exc.code,
                f"tunnel {self.tunnel_id}: {exc.message} — {_advice(exc)}",
                exc.http_status,
                exc.request_id,
            )
            log.error("tunnel worker stopped: %s", self._fatal)
        self._stop.set()
        self._wake.set()

    def _on_channel_fatal(self, exc: BaseException) -> None:
        if isinstance(exc, TablestoreError) and self.session.is_fatal(exc):
            self._raise_fatal(exc)

    def _session(self) -> None:
        try:
            self.session.connect()
        except SessionLostError:
            raise
        except TablestoreError as exc:  # fatal (the session retried the transient ones)
            self._raise_fatal(exc)
            return
        lost: SessionLostError | None = None
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    self._heartbeat_once()
                except SessionLostError:
                    raise
                except ResourceGoneError as exc:  # GetCheckpoint of a newly assigned channel: we were forgotten
                    self.session.mark_lost(exc)
                    raise SessionLostError(f"GetCheckpoint: {exc}") from exc
                except TablestoreError as exc:  # fatal: the session returns None after a transient failure
                    self._raise_fatal(exc)
                    break
                self._metrics.maybe_log(self.config.progress_log_interval_s, self.tunnel_id)
                self._wait_for_beat(started + self.config.heartbeat_interval_s)
                # Woken early (a channel closed): still keep a minimum gap between heartbeats.
                gap = min(MIN_HEARTBEAT_GAP_S, self.config.heartbeat_interval_s) - (
                    time.monotonic() - started
                )
                if gap > 0:
                    self._stop.wait(gap)
        except SessionLostError as exc:
            lost = exc
        self._end_session(graceful=lost is None and self._graceful and self._fatal is None)
        if lost is not None:
            raise lost

    def _wait_for_beat(self, deadline: float) -> None:
        """Until ``deadline``, or until a channel closes while the worker has room for another channel (fewer
        open channels than read threads): then the next heartbeat reports the close and asks for more at once.
        With more channels than that, closes wait for the regular beat, so heartbeats do not follow channels."""
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._wake.wait(remaining):
                return
            self._wake.clear()
            with self._closes_lock:
                open_channels = self._open_at_beat - self._closed_since_beat
            if open_channels < self.config.read_threads:
                return

    def _channel_closed(self) -> None:
        with self._closes_lock:
            self._closed_since_beat += 1
        self._wake.set()

    def _end_session(self, *, graceful: bool) -> None:
        with self._lock:
            consumers = list(self._consumers.values()) + self._retired
            self._consumers.clear()
            self._retired.clear()
            self._channels.clear()
        for consumer in consumers:
            consumer.stop(flush=graceful)
        deadline = time.monotonic() + 30.0  # one bound for all: a hung processor must not cost 30 s per channel
        for consumer in consumers:
            if not consumer.join(timeout=max(0.0, deadline - time.monotonic())):
                log.warning("channel %s did not stop within 30s", consumer.channel_id)
        self._metrics.maybe_log(self.config.progress_log_interval_s, self.tunnel_id, force=True)
        self._metrics.set_owned(0)
        self.session.shutdown(notify=self._graceful)  # not graceful: a simulated crash, the server times it out

    # -- one heartbeat ------------------------------------------------------------------------------
    def _heartbeat_once(self) -> None:
        with self._closes_lock:  # a close from here on wakes the next beat early, if it leaves room
            self._closed_since_beat = 0
        with self._lock:
            for cid, current in self._consumers.items():
                report = current.report()
                if report is not None:
                    self._channels[cid] = report
            sent = list(self._channels.values())
            self._retired = [c for c in self._retired if c.busy()]
        answer = self.session.heartbeat(sent)
        if answer is None:
            return  # a transient failure: the next beat reports again
        with self._lock:
            from_server = {ch.channel_id: ch for ch in answer}
            merged = merge_channels(self._channels, answer)
            for cid in list(self._consumers):
                if cid not in merged:
                    self._retire(cid)
            for ch in merged.values():
                consumer: ChannelConsumer | None = self._consumers.get(ch.channel_id)
                if consumer is not None and consumer.superseded_by(ch):
                    self._retire(ch.channel_id)
                    consumer = None
                if consumer is None:
                    if ch.status not in (ChannelStatus.OPEN, ChannelStatus.CLOSING):
                        continue
                    consumer = self._new_consumer(ch)
                    self._consumers[ch.channel_id] = consumer
                if ch == from_server[ch.channel_id]:  # never feed our own pending report back
                    consumer.notify(ch)
            self._channels = {cid: ch for cid, ch in merged.items() if cid in self._consumers}
            owned = sum(1 for c in self._consumers.values()
                        if c.state in (ConsumerState.WAIT, ConsumerState.RUNNING))
        with self._closes_lock:
            self._open_at_beat = owned
        self._metrics.set_owned(owned)

    def _retire(self, channel_id: str) -> None:
        consumer = self._consumers.pop(channel_id)
        consumer.stop(flush=consumer.state != ConsumerState.CLOSED)
        self._retired.append(consumer)
        self._metrics.forget(channel_id)

    def _new_consumer(self, ch: Channel) -> ChannelConsumer:
        assert self.client_id is not None and self._pools is not None
        token, seq = "", 0
        failed: BaseException | None = None
        try:
            token, seq = self.session.get_checkpoint(ch.channel_id)
        except ResourceGoneError:
            raise
        except TablestoreError as exc:
            log.warning("channel %s: GetCheckpoint failed (%s); releasing it", ch.channel_id, exc)
            failed = exc
        # The SDK heuristic (a token with an iterator is a stream token), plus the "BaseData_" id prefix.
        stream = token != FINISHED and (is_stream_token(token) or not ch.channel_id.startswith("BaseData"))
        context = ChannelContext(self.tunnel_id, self.client_id, ch.channel_id,
                                 "Stream" if stream else "BaseData", token, token, new_trace_id())
        processor: ChannelProcessor | None = self._shared
        owns = False
        if failed is None and self._factory is not None:
            try:
                processor = self._factory(context)
                owns = True
            except Exception as exc:  # noqa: BLE001
                log.exception("channel %s: processor factory failed; releasing it", ch.channel_id)
                failed = exc
        return ChannelConsumer(
            client=self.client, session=self.session, context=context, channel=ch, token=token, sequence_number=seq,
            processor=processor, owns_processor=owns, config=self.config, metrics=self._metrics,
            pools=self._pools, on_closed=self._channel_closed, on_fatal=self._on_channel_fatal,
            failed=failed,
        )
