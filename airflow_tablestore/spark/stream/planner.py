"""The driver side of a streaming query over a tunnel: one tunnel client, offsets of spans, checkpoints.

An offset is ``{"tunnel_id": ..., "channels": {channel_id: span}}``: for each channel, the last span planned
for it (:class:`~airflow_tablestore.client.tunnel.span.Span`, which starts at a concrete position). A
micro-batch reads, for each channel whose span changed between its start and end offsets, the end offset's
span; the channel's position after the batch is where that span ended, which the read task stored in the
:class:`~.positions.PositionStore` (or, should no task have read it, the driver finds by reading it).

The tunnel session is the consumer driver's (:class:`~airflow_tablestore.client.tunnel.rounds.RoundSession`:
heartbeats, lost and fatal errors, the channel state machine, the checkpoint rule); executors read with its client
id. Server checkpoints move
only for offsets Spark has committed: in ``commit(end)``, and in ``latestOffset(start)`` (Spark asks for the
next batch only once the batch ending at ``start`` is committed).
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.errors import ResourceGoneError, TablestoreClientError, TunnelNotFoundError
from airflow_tablestore.client.model import ChannelStatus, TunnelDescription
from airflow_tablestore.client.tunnel.cutoff import STREAM, full_phase_done
from airflow_tablestore.client.tunnel.rounds import RoundSession
from airflow_tablestore.client.tunnel.span import Position, Span, SpanEnd, SpanRead, drain
from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions
from airflow_tablestore.spark.stream.positions import PositionStore

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
"""A stream channel that caught up is read again after this long (so an idle query does not spin)."""
POLL_S = 0.5


class StreamStuckError(TablestoreClientError):
    """An ``availableNow`` query cannot finish: channels it must read stay with another client."""


@dataclass(frozen=True)
class ChannelSpan:
    """One channel's span of a micro-batch, as the driver hands it to a read task."""

    channel_id: str
    span: Span


class StreamPlanner:
    """Plans micro-batches of one tunnel and moves its server checkpoints (lives in Spark's source process)."""

    def __init__(self, options: SourceOptions) -> None:
        if not options.tunnel:
            raise OptionError("option 'tunnel' is required for spark.readStream.format('tablestore')")
        self.options = options
        self.client = options.settings.tunnel_client()
        self.store = PositionStore(options.settings, options.positions_table)
        self.tunnel_id = self._describe().tunnel.tunnel_id
        self.session: RoundSession | None = None
        self.target_us: int | None = None
        self._checkpoints: dict[str, tuple[Position, int]] = {}
        self._ends: dict[str, SpanEnd] = {}
        self._last_plan: dict[str, float] = {}
        self._committed_keys: dict[str, str] = {}

    # -- tunnel ---------------------------------------------------------------------------------------
    def _describe(self) -> TunnelDescription:
        o = self.options
        assert o.tunnel is not None
        try:
            desc = self.client.describe_tunnel(o.table, o.tunnel)
        except TunnelNotFoundError:
            raise OptionError(f"tunnel {o.tunnel!r} of table {o.table!r} does not exist: create it first "
                              "(TablestoreCreateTunnelOperator or TunnelClient.create_tunnel)") from None
        if desc.tunnel.expired:
            raise OptionError(f"tunnel {o.tunnel!r} expired (its stream position fell out of the stream "
                              "retention): delete and recreate it, and start the query without its checkpoint")
        return desc

    def _session(self) -> RoundSession:
        if self.session is None or self.session.tunnel.lost:
            if self.session is not None:
                log.warning("tunnel client %s was lost; connecting again", self.session.client_id)
                self.session.close()
                self._checkpoints.clear()
            self.store.ensure_table()
            self.session = RoundSession(self.client, self.tunnel_id,
                                         heartbeat_interval=self.options.heartbeat_interval,
                                         client_timeout=self.options.client_timeout,
                                         client_tag=f"spark-stream-{socket.gethostname()}").start()
        return self.session

    def _check_tunnel(self, offset: dict[str, Any]) -> dict[str, dict[str, Any]]:
        tunnel_id = offset.get("tunnel_id")
        if tunnel_id and tunnel_id != self.tunnel_id:
            raise OptionError(f"the query's checkpoint is for tunnel id {tunnel_id}, but tunnel "
                              f"{self.options.tunnel!r} is now {self.tunnel_id} (recreated): start the query with a "
                              "new checkpoint location")
        return dict(offset.get("channels") or {})

    # -- Spark's calls ----------------------------------------------------------------------------------
    def initial_offset(self) -> dict[str, Any]:
        """No channel yet: each channel starts at its server checkpoint when it is first planned."""
        return {"tunnel_id": self.tunnel_id, "channels": {}}

    def prepare_available_now(self) -> None:
        """``availableNow``: read the changes committed before now, then stop."""
        self.target_us = time.time_ns() // 1000
        log.info("availableNow: reading the changes of tunnel %s committed before %d µs", self.options.tunnel,
                 self.target_us)

    def latest_offset(self, start: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        """The end offset of the next micro-batch (``start`` when there is nothing to read)."""
        channels = self._check_tunnel(start)
        session = self._session()
        self._commit(channels)  # the batch ending at ``start`` is committed by Spark
        deadline = time.monotonic() + self.options.channel_wait_s
        while True:
            session.heartbeat()
            desc = self._describe()
            end = self._plan(channels, desc, max_rows)
            if end != channels or self.target_us is None:
                return {"tunnel_id": self.tunnel_id, "channels": end}
            waiting = self._waiting_for(channels, desc)
            if waiting is None:
                log.info("availableNow: tunnel %s is read through the target", self.options.tunnel)
                # the query ends now: hand the channels back at once (Spark may stop this process before
                # ``stop()`` has run, leaving them to the client timeout)
                self._close_session()
                return {"tunnel_id": self.tunnel_id, "channels": end}
            if time.monotonic() > deadline:
                raise StreamStuckError(f"availableNow cannot finish: {waiting} (waited "
                                       f"{self.options.channel_wait_s}s; option channel_wait_s)")
            time.sleep(POLL_S)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[ChannelSpan]:
        """The spans to read: each channel's end span that differs from its start span."""
        before = self._check_tunnel(start)
        after = self._check_tunnel(end)
        spans = [ChannelSpan(cid, Span.from_dict(data)) for cid, data in sorted(after.items())
                 if before.get(cid) != data]
        spans = [s for s in spans if not s.span.start.finished]
        self._wait_owned([s.channel_id for s in spans])
        return spans

    @property
    def client_id(self) -> str:
        return self._session().client_id

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed every batch through ``end``: move the server checkpoints there."""
        channels = self._check_tunnel(end)
        self._session()
        self._commit(channels)

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
            self._checkpoints.clear()

    def stop(self) -> None:
        self._close_session()
        self.store.close()
        self.client.close()

    # -- positions --------------------------------------------------------------------------------------
    def resolve(self, channel_id: str, span: Span) -> SpanEnd:
        """Where ``span`` of the channel ended: from the store, else by reading it here (no task read it)."""
        key = span.key(channel_id)
        end = self._ends.get(key) or self.store.get_end(self.tunnel_id, key)
        if end is None:
            log.warning("no read task stored where span %s of channel %s ended (the batch was not read?): "
                        "reading it on the driver", key, channel_id)
            self._wait_owned([channel_id])
            end = drain(SpanRead(self.client, self.tunnel_id, self._session().client_id, channel_id, span,
                                 settle_us=self.options.settle_ms * 1000))  # records not kept
            self.store.put_end(self.tunnel_id, key, end)
        self._ends[key] = end
        return end

    def _checkpoint_of(self, channel_id: str) -> tuple[Position, int]:
        known = self._checkpoints.get(channel_id)
        if known is None:
            token, sequence = self._session().tunnel.get_checkpoint(channel_id)
            position = self.store.checkpoint_position(self.tunnel_id, channel_id, token, sequence)
            known = self._checkpoints[channel_id] = (position, sequence)
        return known

    def _commit(self, channels: dict[str, dict[str, Any]]) -> None:
        session = self._session()
        finished = False
        for cid, data in sorted(channels.items()):
            span = Span.from_dict(data)
            end = self.resolve(cid, span)
            try:
                finished = self._store_checkpoint(session, cid, end.position) or finished
            except ResourceGoneError as exc:
                log.info("channel %s is not ours right now (%s): its checkpoint moves when it is", cid, exc)
                self._checkpoints.pop(cid, None)
                continue
            key = span.key(cid)
            previous = self._committed_keys.get(cid)
            if previous and previous != key:
                self.store.delete_end(self.tunnel_id, previous)
            self._committed_keys[cid] = key
        if finished:
            # report TERMINATED now, once for all the channels this commit finished (a heartbeat carries every
            # channel's state): the next channels open sooner
            session.heartbeat()

    def _store_checkpoint(self, session: RoundSession, cid: str, position: Position) -> bool:
        """Move the channel's server checkpoint to ``position``; True when that finished the channel now."""
        known, sequence = self._checkpoint_of(cid)
        if known == position:
            if position.finished:
                session.mark_finished(cid)
            return False
        if known.finished:
            return False
        if known.token != position.token:
            self.store.put_checkpoint(self.tunnel_id, cid, position, sequence + 1, previous=(known, sequence))
            if not session.commit(cid, known.token, sequence, position.token):
                self._checkpoints.pop(cid, None)
                return False
            sequence += 1
        else:  # the same token further on: only the skip moves (a checkpoint holds a token only)
            self.store.put_checkpoint(self.tunnel_id, cid, position, sequence)
        self._checkpoints[cid] = (position, sequence)
        if position.finished:
            session.mark_finished(cid)
            return True
        return False

    def _position(self, cid: str, channels: dict[str, dict[str, Any]]) -> tuple[Position, Span | None]:
        """The channel's position now, and the span that led there (None: from its server checkpoint)."""
        data = channels.get(cid)
        if data is None:
            return self._checkpoint_of(cid)[0], None
        span = Span.from_dict(data)
        return self.resolve(cid, span).position, span

    # -- planning ---------------------------------------------------------------------------------------
    def _until(self) -> int:
        """The time bound of new stream spans: now (their reads wait until it is ``settle_ms`` old)."""
        until = time.time_ns() // 1000
        return min(until, self.target_us) if self.target_us is not None else until

    def _plan(self, channels: dict[str, dict[str, Any]], desc: TunnelDescription,
              max_rows: int | None) -> dict[str, dict[str, Any]]:
        session = self._session()
        status = {c.channel_id: c for c in desc.channels}
        # keep every channel the server still has: a channel held by a dead client comes back to us later
        end = {cid: data for cid, data in channels.items()
               if cid in status and status[cid].status != ChannelStatus.TERMINATED}
        until = self._until()
        now = time.monotonic()
        due: dict[str, tuple[Position, bool]] = {}
        for cid in session.open_channels():
            info = status.get(cid)
            if info is None:
                continue
            position, last = self._position(cid, channels)
            if position.finished:
                continue
            stream = info.channel_type == STREAM
            if stream and last is not None:
                last_end = self.resolve(cid, last)
                if last_end.caught_up or last_end.reached_until:
                    if last.until_us is not None and last.until_us >= until:
                        continue  # nothing new before ``until``
                    if self.target_us is None and now - self._last_plan.get(cid, 0.0) < IDLE_WAIT_S:
                        continue
            due[cid] = (position, stream)
        if not due:
            return end
        limit = self.options.max_records_per_channel
        if max_rows is not None:
            limit = max(1, min(limit, max_rows // len(due)))
        for cid, (position, stream) in due.items():
            end[cid] = Span(position, limit, until if stream else None, stream).as_dict()
            self._last_plan[cid] = now
        return end

    def _waiting_for(self, channels: dict[str, dict[str, Any]], desc: TunnelDescription) -> str | None:
        """Why an ``availableNow`` query is not done yet, or None when it has read everything."""
        session = self._session()
        mine = set(session.open_channels())
        for info in desc.channels:
            if info.status != ChannelStatus.TERMINATED and info.channel_id not in mine and info.client_id:
                return (f"channel {info.channel_id} ({info.channel_type}, {info.status.value}) is held by client "
                        f"{info.client_id} (another query or consumer of this tunnel, or a dead one until the "
                        "server times it out)")
        if not full_phase_done(desc):
            return f"the base data is not consumed yet (tunnel stage {desc.tunnel.stage.value})"
        for info in desc.channels:
            if info.status == ChannelStatus.TERMINATED:
                continue
            cid = info.channel_id
            if cid not in mine:
                return f"channel {cid} ({info.channel_type}, {info.status.value}) is not assigned to this query yet"
            position, last = self._position(cid, channels)
            if position.finished:
                continue
            if last is None or last.until_us is None or self.target_us is None or last.until_us < self.target_us:
                return f"channel {cid} is not read through the target yet"
            last_end = self.resolve(cid, last)
            if not (last_end.caught_up or last_end.reached_until):
                return f"channel {cid} has more records before the target"
        return None

    def _wait_owned(self, channel_ids: list[str]) -> None:
        """Wait until the server assigns every channel to this client (a replayed batch after a restart
        needs the channels a dead client still holds until its timeout)."""
        session = self._session()
        deadline = time.monotonic() + self.options.channel_wait_s
        while True:
            missing = sorted(set(channel_ids) - set(session.open_channels()))
            if not missing:
                return
            if time.monotonic() > deadline:
                raise StreamStuckError(f"channels {', '.join(missing)} of tunnel {self.options.tunnel!r} were "
                                       f"not assigned to this query's client within {self.options.channel_wait_s}s "
                                       "(another consumer holds them?)")
            time.sleep(POLL_S)
            session.heartbeat()
