"""``StreamBacklog``: counts a table's changes past a tunnel's consume point through the Stream API, consuming
nothing.

A tunnel's consume point (DescribeTunnel's ``tunnel_rpo``) only moves when its consumer checkpoints; the changes
after it are what that consumer has still to read. This module tails every shard of the table's stream with its
own shard iterators (GetShardIterator, GetStreamRecord: reads that take no channel, lease or checkpoint from
anybody) and keeps the commit times of the changes it saw that are after the consume point and not yet
*reported* (:meth:`StreamBacklog.mark_reported`). What it reported it never counts again; a new instance (a
restarted process) starts again from the consume point, so a change nobody consumed is counted again: at least
once, never lost.

The tunnel-wide consume point is the slowest stream channel's, so a change a faster channel has already consumed
may still be counted: the count errs towards "more pending", never fewer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from airflow_tablestore.client.errors import NotFoundError, TablestoreClientError, TrimmedDataError
from airflow_tablestore.client.model import ChannelStatus, TunnelDescription
from airflow_tablestore.client.stream.client import StreamClient

log = logging.getLogger(__name__)

#: GetStreamRecord page size (the service's maximum).
PAGE = 1000
#: Records read per :meth:`StreamBacklog.poll` at most (across shards); the rest is read by the next poll.
DEFAULT_READ_BUDGET = 100_000


def unconsumed_since_ns(description: TunnelDescription) -> int:
    """Nanoseconds since epoch after which a tunnel's changes are unconsumed: its consume point; before the
    stream stage (consume point 0) the slowest stream channel's position, else where the tunnel's stream
    starts (its ``stream_start``, or its creation)."""
    if description.consume_point_ns > 0:
        return description.consume_point_ns
    channels = [c.consume_point_ns for c in description.channels
                if c.channel_type == "Stream" and c.status != ChannelStatus.TERMINATED and c.consume_point_ns > 0]
    if channels:
        return min(channels)
    info = description.tunnel
    return info.stream_start_ns or info.create_time_ns


@dataclass(frozen=True)
class Backlog:
    """What one poll found: ``records`` changes after the consume point not reported yet, the commit times (µs)
    of the oldest and newest of them, the consume point the count rests on, and whether every shard was read
    to its end (False when the poll's read budget ran out first)."""

    records: int
    first_us: int | None
    last_us: int | None
    consume_point_ns: int
    caught_up: bool


@dataclass
class _Shard:
    iterator: str | None  # None: a closed shard read to its end
    pending: list[int] = field(default_factory=list)  # commit times (µs) of unreported changes, in shard order
    seen_us: int = 0  # commit time of the last change read from the shard


class StreamBacklog:
    """The unreported, unconsumed changes of ``table``'s stream, kept current by :meth:`poll`.

    Not thread-safe: one caller polls at a time (the trigger calls it from one worker thread at a time).
    """

    def __init__(self, client: StreamClient, table_name: str, *, read_budget: int = DEFAULT_READ_BUDGET) -> None:
        if read_budget <= 0:
            raise TablestoreClientError(f"read_budget must be positive, got {read_budget}")
        self.client = client
        self.table_name = table_name
        self.read_budget = read_budget
        self._stream_id: str | None = None
        self._shards: dict[str, _Shard] = {}

    def poll(self, consume_point_ns: int) -> Backlog:
        """Read what the shards got since the last poll and count the changes committed after
        ``consume_point_ns`` that were not reported. Raises :class:`TablestoreClientError` when the table's
        stream is disabled, :class:`NotFoundError` when the table is gone."""
        stream_id = self.client.stream_id_of(self.table_name)
        if stream_id is None:
            raise TablestoreClientError(f"table {self.table_name!r} has no stream enabled: a tunnel's changes "
                                        "are counted through the table's stream")
        if stream_id != self._stream_id:  # first poll, or the stream was disabled and enabled again
            self._stream_id, self._shards = stream_id, {}
        shards = self.client.describe_stream(stream_id).shards
        known = {s.shard_id for s in shards}
        for gone in set(self._shards) - known:  # trimmed away by the retention
            del self._shards[gone]
        budget = self.read_budget
        caught_up = True
        for shard in shards:
            state = self._shards.get(shard.shard_id)
            if state is None:
                state = self._shards[shard.shard_id] = _Shard(self._position(stream_id, shard.shard_id,
                                                                             consume_point_ns))
            if budget <= 0:
                caught_up = False
                break
            read, done = self._read(stream_id, shard.shard_id, state, consume_point_ns, budget)
            budget -= read
            caught_up = caught_up and done
        times: list[int] = []
        for state in self._shards.values():
            state.pending = [ts for ts in state.pending if ts * 1000 > consume_point_ns]  # consumed meanwhile
            times.extend(state.pending)
        return Backlog(len(times), min(times, default=None), max(times, default=None), consume_point_ns,
                       caught_up)

    def mark_reported(self) -> None:
        """The changes the last poll counted are reported: later polls count only changes read after them."""
        for state in self._shards.values():
            state.pending = []

    def _position(self, stream_id: str, shard_id: str, since_ns: int) -> str | None:
        """An iterator at the shard's first change at or after ``since_ns`` (its oldest retained one when that
        point is older than the retention)."""
        try:
            return self.client.get_shard_iterator(stream_id, shard_id, since_ns // 1000 if since_ns > 0 else None)
        except TrimmedDataError:
            log.warning("Stream of %r: shard %s holds nothing that old any more; counting from its oldest "
                        "retained change", self.table_name, shard_id)
            return self.client.get_shard_iterator(stream_id, shard_id)

    def _read(self, stream_id: str, shard_id: str, state: _Shard, consume_point_ns: int,
              budget: int) -> tuple[int, bool]:
        """Read one shard forward (at most ``budget`` records): ``(records read, reached its end)``."""
        read = 0
        repositioned = False
        while state.iterator is not None and read < budget:
            try:
                result = self.client.get_stream_records(state.iterator, limit=min(PAGE, budget - read))
            except (TrimmedDataError, NotFoundError):
                if repositioned:  # a fresh iterator refused too: try again at the next poll, not in a loop
                    return read, False
                # the position fell out of the retention: go on from the last change read (changes of that
                # microsecond may be counted twice: at least once)
                log.warning("Stream of %r: shard %s was trimmed under the poll; repositioning", self.table_name,
                            shard_id)
                state.iterator = self._position(stream_id, shard_id, max(consume_point_ns, state.seen_us * 1000))
                repositioned = True
                continue
            read += len(result.records)
            for record in result.records:
                if record.sequence is None:
                    continue
                state.seen_us = record.sequence.timestamp_us
                if state.seen_us * 1000 > consume_point_ns:
                    state.pending.append(state.seen_us)
            state.iterator = result.next_iterator
            if not result.records:
                return read, True  # caught up with an open shard (or a closed one read to its end)
        return read, state.iterator is None
