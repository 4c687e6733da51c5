"""The driver loop: check the tunnel, then run bounded rounds until the phase is done.

A round: heartbeat → GetCheckpoint of the OPEN channels of the phase → one Spark job (``mapInArrow``, a bounded
number of tasks, each reading its share of the channels) that reads and writes to the sink → only then Checkpoint
the new tokens and report finished channels TERMINATED. Full phase: until every BaseData channel is TERMINATED and
the tunnel reached ProcessStream. Incremental phase: until the tunnel consume point (slowest stream channel) reaches
the cutoff.

What a run reports (its summary, its error types and messages) is :mod:`.outcome`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from airflow_tablestore.client.backoff import FAILED_ROUND
from airflow_tablestore.client.epoch import ns_to_iso
from airflow_tablestore.client.errors import (
    ResourceGoneError,
    TablestoreError,
    TunnelNotFoundError,
)
from airflow_tablestore.client.model import ChannelStatus, TunnelDescription
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.tunnel.client import FINISHED, TunnelClient
from airflow_tablestore.client.tunnel.cutoff import BASE, STREAM, consumed_through, full_phase_done
from airflow_tablestore.client.tunnel.rounds import RoundSession
from airflow_tablestore.client.tunnel.session import SessionLostError, TunnelSession
from airflow_tablestore.spark.consumer.options import JobOptions
from airflow_tablestore.spark.consumer.outcome import (
    ConfigurationError,
    JobError,
    JobSummary,
    is_wrapped_resource_gone,
    resource_gone_line,
)
from airflow_tablestore.spark.consumer.reader import ChannelTask, RoundPlan, partition_count, round_function
from airflow_tablestore.spark.consumer.round_progress import DEFAULT_INTERVAL_S, RoundProgress
from airflow_tablestore.spark.consumer.round_result import ChannelResult
from airflow_tablestore.spark.sinks.protocol import Sink

log = logging.getLogger(__name__)

MAX_RECONNECTS = 5
MAX_CHANNEL_FAILURES = 6
WAIT_LOG_INTERVAL_S = 10.0


def _fmt_ns(ns: int) -> str:
    return ns_to_iso(ns) or "none"


def spark_round(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
    """Run a round as one Spark job of ``plan.partitions`` ``mapInArrow`` tasks; returns the control rows."""
    n = plan.partitions
    frame = spark.range(0, n, 1, numPartitions=n).mapInArrow(round_function(plan), ChannelResult.DDL)
    return [ChannelResult.from_row(row.asDict()) for row in frame.collect()]


def task_slots(spark: Any) -> int:
    """Spark's default parallelism (the executors' cores), or 1 for a runner without a Spark session."""
    context = getattr(spark, "sparkContext", None)
    return int(context.defaultParallelism) if context is not None else 1


class ConsumerJob:
    """One run of one phase. ``spark_factory`` is called only when there is work to do; ``runner`` executes
    a round (default :func:`spark_round`; :func:`~airflow_tablestore.spark.consumer.reader.run_round_locally`-based
    runners run without Spark)."""

    def __init__(
        self,
        options: JobOptions,
        settings: ConnectionSettings,
        sink: Sink,
        spark_factory: Callable[[], Any],
        runner: Callable[[Any, RoundPlan], list[ChannelResult]] = spark_round,
    ) -> None:
        self.runner = runner
        self.options = options
        self.settings = settings
        self.sink = sink
        self.spark_factory = spark_factory
        self._spark_session: Any = None
        self.client: TunnelClient = settings.tunnel_client(timeout=options.request_timeout)
        self.summary = JobSummary(options.phase, options.table, options.tunnel,
                                  cutoff=options.cutoff.isoformat() if options.cutoff else None)
        self.summary.profile = {"read": 0.0, "sink": 0.0, "spark_round": 0.0, "checkpoint": 0.0, "plan": 0.0}
        self._rotation = 0
        self.progress_interval_s = DEFAULT_INTERVAL_S
        self._waiting_since: float | None = None
        self._last_wait_log = 0.0
        self._channel_failures: dict[str, int] = {}

    # -- tunnel state -------------------------------------------------------------------------------
    def describe(self) -> TunnelDescription:
        o = self.options
        try:
            desc = self.client.describe_tunnel(o.table, o.tunnel)
        except TunnelNotFoundError:
            raise ConfigurationError(
                f"tunnel {o.tunnel!r} of table {o.table!r} does not exist: create it first "
                "(TablestoreCreateTunnelOperator or TunnelClient.create_tunnel)") from None
        if desc.tunnel.expired:
            raise ConfigurationError(
                f"tunnel {o.tunnel!r} expired (its stream position fell out of the stream retention): delete "
                "and recreate it, then run the full phase again")
        return desc

    def done(self, desc: TunnelDescription) -> bool:
        if self.options.phase == "full":
            return full_phase_done(desc)
        assert self.options.cutoff is not None
        return consumed_through(desc, (self.options.cutoff_us or 0) * 1000).done

    # -- main loop ----------------------------------------------------------------------------------
    def run(self) -> JobSummary:
        o = self.options
        started = time.monotonic()
        desc = self.describe()
        log.info("phase %s of tunnel %s (table %s, type %s, stage %s, %d channels) -> %s",
                 o.phase, o.tunnel, o.table, desc.tunnel.tunnel_type.value, desc.tunnel.stage.value,
                 len(desc.channels), self.sink.describe())
        if o.phase == "incremental" and not full_phase_done(desc):
            raise ConfigurationError(
                f"tunnel {o.tunnel!r} is still in stage {desc.tunnel.stage.value}: run --phase full first "
                "(incremental consumption starts once the base data is consumed)")
        self._recover_staged(desc)
        if self.done(desc):
            self._log_done(desc, skipped=True)
            self.summary.skipped = True
            self.summary.seconds = time.monotonic() - started
            return self.summary
        self.sink.check()
        reconnects = 0
        while True:
            session = RoundSession(
                self.client, desc.tunnel.tunnel_id, heartbeat_interval=o.heartbeat_interval,
                client_timeout=o.client_timeout, client_tag=f"spark-{socket.gethostname()}",
            )
            try:
                session.start()
                desc = self._rounds(session, desc)
                break
            except SessionLostError as exc:
                reconnects += 1
                if reconnects > MAX_RECONNECTS:
                    raise JobError(f"tunnel session lost {reconnects} times, giving up: {exc}") from None
                log.warning("%s; reconnecting (round output stays in the sink and is replayed idempotently)",
                            exc)
            finally:
                session.close()
        self.summary.seconds = time.monotonic() - started
        self._log_done(desc, skipped=False)
        return self.summary

    def _recover_staged(self, desc: TunnelDescription) -> None:
        """Publish rounds a run that stopped between checkpoint and publish left staged (Parquet sink), even
        when there is nothing left to read."""
        staged = set(self.sink.staged_channels())
        if not staged:
            return
        known = [c.channel_id for c in desc.channels if c.channel_id in staged]
        session = TunnelSession(self.client, desc.tunnel.tunnel_id, client_timeout_s=self.options.client_timeout,
                                client_tag=f"spark-recovery-{socket.gethostname()}")
        session.connect()
        try:
            for cid in known:
                token, seq = session.get_checkpoint(cid)
                self.sink.recover(cid, token, seq)
        finally:
            session.shutdown()
        log.info("checked staged output of %d channel(s) against their checkpoints", len(known))

    def _log_done(self, desc: TunnelDescription, *, skipped: bool) -> None:
        self.summary.consume_point = _fmt_ns(desc.consume_point_ns)
        what = "nothing to do" if skipped else "done"
        if self.options.phase == "full":
            log.info("full phase %s: tunnel stage %s", what, desc.tunnel.stage.value)
        else:
            log.info("incremental phase %s: replicated through %s (the tunnel's consume point), cutoff %s",
                     what, self.summary.consume_point, self.summary.cutoff)

    def _log_consume_point(self, desc: TunnelDescription) -> None:
        cutoff_ns = (self.options.cutoff_us or 0) * 1000
        live = [c for c in desc.channels if c.channel_type == STREAM and c.status != ChannelStatus.TERMINATED]
        behind = [c for c in live if c.consume_point_ns < cutoff_ns]
        log.info("consume point %s vs cutoff %s: %d of %d stream channels behind",
                 _fmt_ns(desc.consume_point_ns), self.summary.cutoff, len(behind), len(live))

    def _spark(self) -> Any:
        """The Spark session, started on the first round (a tunnel problem fails before Spark starts)."""
        if self._spark_session is None:
            started = time.monotonic()
            self._spark_session = self.spark_factory()
            self.summary.profile["spark_start"] = time.monotonic() - started
        return self._spark_session

    def _rounds(self, session: RoundSession, desc: TunnelDescription) -> TunnelDescription:
        try:
            return self._round_loop(session, desc)
        except ResourceGoneError as exc:  # the server forgot this client (timed out): reconnect
            session.tunnel.mark_lost(exc)
            raise SessionLostError(f"tunnel client {session.client_id} is gone: {exc}") from None
        except Exception as exc:
            # Inside a Spark round the same 410 reaches the driver wrapped (Py4JJavaError / PythonException
            # carrying the executor's traceback text): recognise it by its error code and reconnect too.
            if not is_wrapped_resource_gone(exc):
                raise
            # Not marked lost: the client may still be live (one channel was taken over), so closing the
            # session sends Shutdown and releases its channels at once instead of after the client timeout.
            raise SessionLostError(f"a channel or the tunnel client {session.client_id} was lost during a "
                                   f"Spark round ({resource_gone_line(exc)})") from None

    def _round_loop(self, session: RoundSession, desc: TunnelDescription) -> TunnelDescription:
        o = self.options
        logged = 0
        while True:
            if o.max_rounds and self.summary.rounds >= o.max_rounds:
                log.info("stopping after --max-rounds %d", o.max_rounds)
                return desc
            session.heartbeat()
            desc = self.describe()
            if o.phase == "incremental" and self.summary.rounds > logged:
                logged = self.summary.rounds
                self._log_consume_point(desc)
            if self.done(desc):
                return desc
            wanted = BASE if o.phase == "full" else STREAM
            types = {ch.channel_id: ch.channel_type for ch in desc.channels}
            channels = [c for c in session.open_channels() if types.get(c) == wanted]
            if not channels:
                self._log_waiting(session, desc, wanted)
                time.sleep(o.idle_wait)
                continue
            self._waiting_since = None
            records = self._round(session, channels)
            if records == 0 and o.phase == "incremental":
                time.sleep(o.idle_wait)  # caught up with the log: let the consume point move on

    def _log_waiting(self, session: RoundSession, desc: TunnelDescription, wanted: str) -> None:
        """Say why there is nothing to read, at most every ``WAIT_LOG_INTERVAL_S``: which clients hold the
        channels, for how long this consumer has waited, and the longest the wait can take."""
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        elif now - self._last_wait_log < WAIT_LOG_INTERVAL_S:
            return
        self._last_wait_log = now
        held = [c for c in desc.channels if c.channel_type == wanted and c.client_id
                and c.client_id != session.client_id
                and c.status in (ChannelStatus.OPEN, ChannelStatus.CLOSING)]
        waited = now - self._waiting_since
        if held:
            owners = sorted({c.client_id for c in held if c.client_id})
            log.info("waiting %.0fs for %d %s channel(s) held by %s: another consumer of this tunnel (it "
                     "hands channels over as they are rebalanced), or a dead one whose channels the server "
                     "releases when its heartbeat timeout runs out (the Spark consumer's --client-timeout, "
                     "%ds by default; other workers' own timeouts)", waited, len(held), wanted,
                     ", ".join(owners), JobOptions.client_timeout)
        else:
            log.info("waiting %.0fs: no open %s channel for this client yet (tunnel stage %s)", waited,
                     wanted, desc.tunnel.stage.value)

    def _select(self, channels: list[str]) -> list[str]:
        limit = self.options.max_parallel_channels
        if not limit or len(channels) <= limit:
            return channels
        start = self._rotation % len(channels)
        self._rotation += limit
        return (channels[start:] + channels[:start])[:limit]

    def _round(self, session: RoundSession, channels: list[str]) -> int:
        """One round: read the chosen channels in one Spark job, then checkpoint what the sink holds."""
        number = self.summary.rounds + 1
        spark = self._spark()
        started = time.monotonic()
        channels = self._select(channels)
        checkpoints = self._checkpoints(session, channels)
        plan = self._round_plan(session, checkpoints, task_slots(spark))
        session.begin_round(channels)
        planned = time.monotonic()
        try:
            with RoundProgress(number, len(channels), spark, lambda: self._lag_line(channels),
                               self.progress_interval_s):
                rows = self.runner(spark, plan)
        finally:
            session.end_round()
        ran = time.monotonic()
        session.tunnel.check()  # never checkpoint a round read under a lost client id
        read = [row for row in rows if not row.error]
        failed = [row for row in rows if row.error]
        finished = self._commit(session, read, checkpoints)
        self._handle_failed_channels(failed, all_failed=not read)
        if finished:
            session.heartbeat()  # report TERMINATED now: the next stage / child channels open sooner
        committed = time.monotonic()
        records = self._count(number, read, finished)
        profile = self.summary.profile
        profile["plan"] += planned - started
        profile["spark_round"] += ran - planned
        profile["checkpoint"] += committed - ran
        self._log_round(number, read, failed, finished, records, committed - started)
        return records

    def _checkpoints(self, session: RoundSession, channels: list[str]) -> dict[str, tuple[str, int]]:
        """Each channel's checkpoint ``(token, sequence)``, after publishing a committed round that a dead run
        left staged in the sink."""
        checkpoints = {channel_id: session.tunnel.get_checkpoint(channel_id) for channel_id in channels}
        for channel_id, (token, sequence) in checkpoints.items():
            self.sink.recover(channel_id, token, sequence)
        return checkpoints

    def _round_plan(self, session: RoundSession, checkpoints: dict[str, tuple[str, int]], slots: int
                    ) -> RoundPlan:
        """What the Spark tasks of a round need: one read assignment per channel, how many tasks share them,
        the sink and the limits."""
        options = self.options
        incremental = options.phase == "incremental"
        tasks = tuple(ChannelTask(channel_id, token, incremental, sequence)
                      for channel_id, (token, sequence) in checkpoints.items())
        return RoundPlan(self.settings, session.tunnel.tunnel_id, session.client_id, tasks, self.sink,
                         options.records_per_channel, options.cutoff_us, options.request_timeout,
                         options.bytes_per_channel, partition_count(len(tasks), options.tasks_per_round, slots))

    def _commit(self, session: RoundSession, read: list[ChannelResult],
                checkpoints: dict[str, tuple[str, int]]) -> int:
        """Checkpoint each channel's new token, then publish its staged output; report the channels that
        finished TERMINATED. Returns how many finished."""
        finished = 0
        for row in sorted(read, key=lambda r: r.channel_id):
            channel_id, start_token, next_token = row.channel_id, row.start_token, row.next_token
            _, sequence = checkpoints[channel_id]
            self._channel_failures.pop(channel_id, None)
            stored = True
            if next_token != start_token and start_token != FINISHED:
                stored = session.commit(channel_id, start_token, sequence, next_token)
                if stored and row.records:
                    self.sink.publish(channel_id, start_token, next_token, sequence + 1)
            if row.finished and stored:  # never report TERMINATED without the "finished" checkpoint
                session.mark_finished(channel_id)
                finished += 1
        return finished

    def _count(self, number: int, read: list[ChannelResult], finished: int) -> int:
        """Add a round's rows to the summary; returns the round's records."""
        summary = self.summary
        records = sum(row.records for row in read)
        summary.rounds = number
        summary.records += records
        summary.bytes += sum(row.bytes for row in read)
        summary.channels_finished += finished
        summary.refused += sum(row.refused for row in read)
        task_peaks = (row.peak_rss_bytes for row in read)
        summary.peak_task_rss_bytes = max([summary.peak_task_rss_bytes, *task_peaks])
        summary.profile["read"] += sum(row.read_seconds for row in read)
        summary.profile["sink"] += sum(row.sink_seconds for row in read)
        return records

    def _log_round(self, number: int, read: list[ChannelResult], failed: list[ChannelResult], finished: int,
                   records: int, wall: float) -> None:
        options = self.options
        details = ""
        if options.phase == "incremental" and options.cutoff is not None:
            newest_us = max((row.max_sequence_timestamp_us or 0 for row in read), default=0)
            details = f", newest record {_fmt_ns(newest_us * 1000)} vs cutoff {options.cutoff.isoformat()}"
        refused = sum(row.refused for row in read)
        if refused:
            details += f", {refused} writes refused by the fence (the destination already held them or newer)"
        if failed:
            details += f", {len(failed)} channel(s) failed and will be replayed"
        log.info("round %d (%s): %d channels, %d records, %d finished, %.2fs, %.0f records/s (total %d)%s",
                 number, options.phase, len(read), records, finished, wall,
                 records / wall if wall > 0 else 0.0, self.summary.records, details)

    def _handle_failed_channels(self, failed: list[ChannelResult], *, all_failed: bool) -> None:
        """Channels whose task met a transient error keep their checkpoint and are replayed next round; the
        job gives up on a channel after ``MAX_CHANNEL_FAILURES`` failed rounds in a row."""
        for row in failed:
            cid = row.channel_id
            count = self._channel_failures.get(cid, 0) + 1
            self._channel_failures[cid] = count
            if count >= MAX_CHANNEL_FAILURES:
                raise JobError(f"channel {cid} failed {count} rounds in a row, giving up: {row.error}")
            log.warning("channel %s failed this round (%s); the other channels' work is checkpointed, this "
                        "one is replayed from its checkpoint (failure %d of at most %d in a row)", cid,
                        row.error, count, MAX_CHANNEL_FAILURES - 1)
        if failed and all_failed:
            worst = max(self._channel_failures[r.channel_id] for r in failed)
            delay = FAILED_ROUND.delay(worst - 1)
            log.info("every channel of the round failed; waiting %.1fs before the next round", delay)
            time.sleep(delay)

    def _lag_line(self, channels: list[str]) -> str | None:
        """For the progress line: how far the round's slowest stream channel is checkpointed (None for
        base)."""
        if self.options.phase != "incremental":
            return None
        desc = self.describe()
        points = [c.consume_point_ns for c in desc.channels if c.channel_id in channels]
        if not points:
            return None
        slowest = min(points)
        behind = max(0.0, ((self.options.cutoff_us or 0) * 1000 - slowest) / 1e9)
        return f"slowest channel checkpointed at {_fmt_ns(slowest)} ({behind:.0f}s before the cutoff)"

    def close(self) -> None:
        with contextlib.suppress(TablestoreError):
            self.client.close()
