"""``StreamWorker``: consume a table's stream through leases in a status table (the model of Amazon's KCL).

One coordinator thread: every ``renew_interval_s`` it renews the leases it owns (conditional updates), reads
all leases of the stream, hands over leases another worker asked for (``LeaseStealer``), takes free/expired
leases, and asks for one more when the spread is uneven; every ``shard_sync_interval_s`` it reads
DescribeStream and creates leases for new shards (splits and merges included). Between those it dispatches one
step of each owned shard's :class:`ShardConsumer` to a thread pool. A shard starts only when all its parent
shards are finished (``Checkpoint = SHARD_END``), so the records of one primary key are delivered in order
across splits/merges.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from airflow_tablestore.client.errors import NotFoundError, TablestoreClientError, TablestoreError
from airflow_tablestore.client.stream.balance import LeaseObserver, plan
from airflow_tablestore.client.stream.client import StreamClient, StreamDescription
from airflow_tablestore.client.stream.config import StreamWorkerConfig
from airflow_tablestore.client.stream.lease import Lease, LeaseLostError, LeaseManager
from airflow_tablestore.client.stream.metrics import StreamMetricsSnapshot, StreamWorkerMetrics
from airflow_tablestore.client.stream.processor import (
    ProcessorFactory,
    RecordProcessor,
    ShardInfo,
    ShutdownReason,
)
from airflow_tablestore.client.stream.shard import LeaseHolder, ShardConsumer
from airflow_tablestore.client.table.client import TableClient

log = logging.getLogger(__name__)

STREAM_NOT_FOUND = "StreamWorkerStreamNotFound"


class StreamWorkerError(TablestoreClientError):
    """The worker cannot run (no stream, stream disabled, status table clash...); the message says why."""


class StreamWorker:
    """Consume the stream of ``table`` with one processor per owned shard (built by ``processor_factory``).

    ``run()`` blocks; ``start()``/``shutdown()`` (or the context manager) run it in the background. Clean
    shutdown calls ``processor.shutdown(REQUESTED)`` on every shard and releases the leases.
    """

    def __init__(
        self,
        table_client: TableClient,
        table: str,
        processor_factory: ProcessorFactory,
        config: StreamWorkerConfig | None = None,
        *,
        stream_client: StreamClient | None = None,
    ) -> None:
        if not callable(processor_factory):
            raise TypeError("processor_factory must be a callable f(shard_info) -> RecordProcessor")
        self.table_client = table_client
        self.stream_client = stream_client or StreamClient(transport=table_client.transport)
        self.table = table
        self.factory = processor_factory
        self.config = config or StreamWorkerConfig()
        self.worker_id = self.config.worker_id
        self.leases = LeaseManager(table_client, self.config.status_table)
        self.stream_id: str | None = None
        self._description: StreamDescription | None = None
        self._observer = LeaseObserver()
        self._metrics = StreamWorkerMetrics()
        self._consumers: dict[str, ShardConsumer] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._stopping = False
        self._error: BaseException | None = None
        self._pool_prefix = f"stream-shard-{self.worker_id}"

    def __repr__(self) -> str:
        return f"StreamWorker(table={self.table!r}, worker_id={self.worker_id!r})"

    # -- public API ---------------------------------------------------------------------------------
    @property
    def metrics(self) -> StreamMetricsSnapshot:
        return self._metrics.snapshot()

    def owned_shards(self) -> list[str]:
        """Shards this worker currently consumes (or waits on)."""
        with self._lock:
            return sorted(sid for sid, c in self._consumers.items() if not c.done)

    def start(self) -> StreamWorker:
        """Prepare (status table, stream, leases) in the caller's thread — errors raise here — then run the
        coordinator in the background."""
        if self._thread is not None:
            raise RuntimeError("a StreamWorker can be started once; build a new one to restart")
        self._prepare()
        self._thread = threading.Thread(target=self._loop_guarded, name=f"stream-worker-{self.worker_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def run(self) -> None:
        """Run until :meth:`shutdown` (from another thread or a processor) or a fatal error."""
        self.start()
        self.join()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise self._error

    def shutdown(self, timeout: float | None = 60.0) -> None:
        """Stop: finish in-flight steps, shut processors down with REQUESTED, release the leases. Callable
        from a processor (returns at once; the worker stops after the current step)."""
        self._stop.set()
        self._wake.set()
        current = threading.current_thread()
        if current.name.startswith(self._pool_prefix):
            return  # called from a processor: the coordinator finishes the shutdown after this step returns
        if self._thread is not None and self._thread is not current:
            self._thread.join(timeout)

    def __enter__(self) -> StreamWorker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    # -- preparation --------------------------------------------------------------------------------
    def _prepare(self) -> None:
        self.leases.ensure_table()
        try:
            stream_id = self.stream_client.stream_id_of(self.table)
        except NotFoundError as exc:
            raise StreamWorkerError(
                f"table {self.table!r} does not exist ({exc.code})",
                code=STREAM_NOT_FOUND,
                request_id=exc.request_id,
            ) from None
        if stream_id is None:
            raise StreamWorkerError(f"table {self.table!r} has no stream enabled; enable it with "
                                    "update_table(stream=StreamSpec(True, hours))", code=STREAM_NOT_FOUND)
        self.stream_id = stream_id
        self._sync_shards()
        log.info("stream worker %s consuming stream %s of table %s (status table %s)", self.worker_id,
                 stream_id, self.table, self.config.status_table)

    def _sync_shards(self) -> None:
        """DescribeStream, then create a lease for every shard without one."""
        assert self.stream_id is not None
        try:
            desc = self.stream_client.describe_stream(self.stream_id)
        except NotFoundError as exc:
            raise StreamWorkerError(
                f"stream {self.stream_id} of table {self.table!r} no longer exists (stream "
                "disabled or table deleted); re-enable the stream and restart with a new "
                "status",
                code=STREAM_NOT_FOUND,
                request_id=exc.request_id,
            ) from None
        self._description = desc
        existing = {lease.shard_id for lease in self.leases.list(self.stream_id)}
        new = [Lease(self.stream_id, shard.shard_id, parent_shard_ids=shard.parent_ids)
               for shard in desc.shards if shard.shard_id not in existing]
        for lease, outcome in zip(new, self.leases.create_all(new), strict=True):
            if isinstance(outcome, Exception):
                raise outcome  # the next shard sync creates what is missing
            if outcome:
                log.info("created lease for shard %s (parents %s)", lease.shard_id,
                         list(lease.parent_shard_ids) or "-")

    def _shard_exists(self, shard_id: str) -> bool:
        desc = self._description
        return desc is None or desc.shard(shard_id) is not None

    # -- coordinator loop ---------------------------------------------------------------------------
    def _loop_guarded(self) -> None:
        self._pool = ThreadPoolExecutor(self.config.max_parallel_shards, thread_name_prefix=self._pool_prefix)
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - surfaced by join()
            self._error = exc
            log.error("stream worker %s stopped: %s", self.worker_id, exc)
        finally:
            self._stop_consumers()
            self._pool.shutdown(wait=True)

    def _loop(self) -> None:
        cfg = self.config
        next_lease_tick = 0.0
        next_sync = time.monotonic() + cfg.shard_sync_interval_s
        next_progress = time.monotonic() + cfg.progress_log_interval_s
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_sync:
                next_sync = now + cfg.shard_sync_interval_s
                self._guard("shard sync", self._sync_shards)
            if now >= next_lease_tick:
                next_lease_tick = now + cfg.renew_interval_s
                self._guard("lease tick", functools.partial(self._lease_tick, now))
            if now >= next_progress:
                m = self.metrics
                log.info(
                    "stream worker %s: %d shard(s) owned, %d records, %d checkpoints, %d shards finished",
                    self.worker_id,
                    m.leases_owned,
                    m.records,
                    m.checkpoints,
                    m.shards_finished,
                )
                next_progress = now + cfg.progress_log_interval_s
            wait = self._dispatch(now)
            self._wake.wait(min(wait, max(0.0, next_lease_tick - time.monotonic())))
            self._wake.clear()

    def _guard(self, what: str, step: Callable[[], None]) -> None:
        """Run a coordinator step; service errors (after the transport's retries) are logged and the step runs
        again at its next period — only :class:`StreamWorkerError` is fatal."""
        try:
            step()
        except StreamWorkerError:
            raise
        except TablestoreError as exc:
            self._metrics.add("coordinator_errors")
            log.warning("stream worker %s: %s failed (%s); retrying next period", self.worker_id, what, exc)

    def _lease_tick(self, now: float) -> None:
        assert self.stream_id is not None
        with self._lock:
            consumers = list(self._consumers.values())
        owned = {consumer.holder: consumer for consumer in consumers if not consumer.done}
        try:  # renew what we own
            for holder in LeaseHolder.renew_all(self.leases, list(owned)):
                owned[holder].request_shutdown(ShutdownReason.LEASE_LOST)
        except TablestoreError as exc:
            log.warning("stream worker %s: renewing %d lease(s) failed (%s); retrying next tick", self.worker_id,
                        len(owned), exc)
        leases = self.leases.list(self.stream_id)
        self._observer.observe(leases, now)
        by_shard = {lease.shard_id: lease for lease in leases}
        with self._lock:
            # A consumer may have handed its lease over after `leases` was read: its row is stale, so never
            # adopt a shard that had a consumer this tick (the next tick reads fresh rows).
            had_consumer = set(self._consumers)
            self._consumers = {k: c for k, c in self._consumers.items() if not (c.done and not c.busy)}
            for lease in leases:  # leases someone handed to us, or ours from before a restart
                if (
                    lease.owner == self.worker_id
                    and not lease.finished
                    and lease.shard_id not in had_consumer
                ):
                    self._adopt(lease)
            for consumer in self._consumers.values():
                row = by_shard.get(consumer.shard_id)
                if row is not None and row.stealer and row.stealer != self.worker_id and not consumer.done:
                    log.info("shard %s: handing the lease over to %s", consumer.shard_id, row.stealer)
                    consumer.holder.note_stealer(row.stealer)
                    consumer.request_shutdown(ShutdownReason.REQUESTED)
                consumer.parents_done = self._parents_done(consumer.info.parent_shard_ids, by_shard)
        take, steal = plan(leases, self.worker_id, self._observer, now, self.config.lease_duration_s)
        for lease, taken in zip(take, self.leases.take_all(take, self.worker_id), strict=True):
            if not isinstance(taken, Lease):  # None: another worker was faster; an error: next tick
                continue
            self._metrics.add("leases_taken")
            log.info("took lease of shard %s (previous owner %r)", lease.shard_id, lease.owner or "none")
            with self._lock:
                self._adopt(taken)
                self._consumers[taken.shard_id].parents_done = self._parents_done(taken.parent_shard_ids,
                                                                                  by_shard)
        if steal is not None:
            try:
                self.leases.request_steal(steal, self.worker_id)
                self._metrics.add("leases_stolen")
                log.info("asked %s to hand over shard %s (balancing)", steal.owner, steal.shard_id)
            except LeaseLostError:
                pass
        with self._lock:
            self._metrics.set("leases_owned", sum(1 for c in self._consumers.values() if not c.done))

    def _parents_done(self, parents: tuple[str, ...], by_shard: dict[str, Lease]) -> bool:
        for parent in parents:
            lease = by_shard.get(parent)
            if lease is None:
                if self._shard_exists(parent):
                    return False  # lease not created yet
                continue  # parent expired from the stream: nothing left to read
            if not lease.finished:
                return False
        return True

    def _adopt(self, lease: Lease) -> None:
        assert self.stream_id is not None
        info = ShardInfo(self.stream_id, self.table, lease.shard_id, lease.parent_shard_ids, lease.checkpoint,
                         self.worker_id)
        processor = self.factory(info)
        if not isinstance(processor, RecordProcessor):
            raise TypeError("processor_factory must return a RecordProcessor")
        self._consumers[lease.shard_id] = ShardConsumer(
            client=self.stream_client, holder=LeaseHolder(self.leases, lease), processor=processor, info=info,
            config=self.config, metrics=self._metrics, shard_exists=self._shard_exists,
        )

    # -- dispatching --------------------------------------------------------------------------------
    def _dispatch(self, now: float) -> float:
        """Submit a step for every idle consumer that is due; returns how long the loop may sleep."""
        assert self._pool is not None
        wait = self.config.renew_interval_s
        with self._lock:
            consumers = list(self._consumers.values())
        for consumer in consumers:
            if consumer.done or consumer.busy:
                continue
            if consumer.due <= now:
                consumer.busy = True
                self._pool_submit(consumer)
            else:
                wait = min(wait, consumer.due - now)
        return max(wait, 0.001)

    def _run_step(self, consumer: ShardConsumer) -> None:
        try:
            delay = consumer.step()
        except BaseException:  # noqa: BLE001 - processor.initialize or a bug: retry the step later
            log.exception("shard %s: step failed", consumer.shard_id)
            delay = self.config.processor_retry_s[1]
        consumer.due = time.monotonic() + (delay or 0.0)
        if delay == 0.0 and not self._stopping:
            # Due again at once (more records): queue its next step here, behind the steps already queued.
            # Waking the coordinator instead would scan every shard after every step.
            try:
                self._pool_submit(consumer)
                return
            except RuntimeError:  # the pool is shutting down
                pass
        consumer.busy = False
        if delay is None or delay == 0.0:
            self._wake.set()

    def _pool_submit(self, consumer: ShardConsumer) -> None:
        assert self._pool is not None
        self._pool.submit(self._run_step, consumer)

    def _withdraw_steal_requests(self) -> None:
        """A stopping worker must not be handed leases: clear ``LeaseStealer`` where it names us."""
        if self.stream_id is None:
            return
        try:
            for lease in self.leases.list(self.stream_id):
                if lease.stealer == self.worker_id and lease.owner:
                    with contextlib.suppress(LeaseLostError):
                        self.leases.request_steal(lease, "")
        except TablestoreError as exc:
            log.warning("could not withdraw steal requests (%s); the owners will hand over to nobody", exc)

    def _release_strays(self) -> None:
        """Free leases handed to us while we were stopping (no consumer of ours will release them)."""
        if self.stream_id is None:
            return
        try:
            for lease in self.leases.list(self.stream_id):
                if lease.owner == self.worker_id and not lease.finished:
                    with contextlib.suppress(LeaseLostError):
                        self.leases.release(lease)
                        log.info("shard %s: released a lease handed over during shutdown", lease.shard_id)
        except TablestoreError as exc:
            log.warning("could not check for leases handed over during shutdown (%s); they will expire", exc)

    def _stop_consumers(self) -> None:
        """Shutdown path: wait for in-flight steps, then shut every consumer down with REQUESTED."""
        self._stopping = True  # steps no longer queue their next step themselves
        self._withdraw_steal_requests()
        with self._lock:
            consumers = list(self._consumers.values())
        for consumer in consumers:
            consumer.request_shutdown(ShutdownReason.REQUESTED)
        deadline = time.monotonic() + 60.0
        while any(c.busy for c in consumers) and time.monotonic() < deadline:
            time.sleep(0.01)
        for consumer in consumers:
            if not consumer.done and not consumer.busy:
                consumer.step()
        self._release_strays()
        log.info("stream worker %s stopped; %d lease(s) released", self.worker_id, len(consumers))
