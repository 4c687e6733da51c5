"""The public Stream API surface (ListStream, DescribeStream, GetShardIterator, GetStreamRecord).

Shards are the store's stream partitions: a split closes a shard and adds two children with ``parent_id``; a
merge closes two adjacent shards and adds one child with ``parent_id`` and ``parent_sibling_id``.

Shard iterators (:mod:`.iterators`) carry a log position and a timestamp ``t``. The iterator is trimmed
(``OTSTrimmedDataAccess``) once ``t`` falls out of the retention window — exactly when records after the
position may have been deleted. GetShardIterator with a ``timestamp`` before the retention window is trimmed
too. Reads that reach the end of an open shard move ``t`` up to "now" (minus a safety margin) so that a
caught-up poller never expires.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.api_common import Handler, parse, set_consumed
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid, table_not_found
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.model import PartitionInfo, TableInfo
from airflow_tablestore.emulator.stream.iterators import decode_iterator, encode_iterator
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
CAUGHT_UP_MARGIN_US = 1_000_000
"""A caught-up iterator is stamped ``now - margin``: a write still committing has a later timestamp."""


def trimmed_error() -> EmulatorError:
    return EmulatorError("OTSTrimmedDataAccess",
                         "Requested stream data is already trimmed or does not exist.", 404)


def _no_stream() -> EmulatorError:
    return EmulatorError("OTSObjectNotExist", "Requested stream does not exist.", 404)


def _no_shard(shard_id: str) -> EmulatorError:
    return EmulatorError("OTSObjectNotExist", f"Requested shard does not exist: {shard_id}.", 404)


class StreamApi:
    """Stream API handlers on top of a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or store.clock

    def routes(self) -> dict[str, Handler]:
        """The route table: wire path → handler."""
        return {
            "/ListStream": self.list_stream,
            "/DescribeStream": self.describe_stream,
            "/GetShardIterator": self.get_shard_iterator,
            "/GetStreamRecord": self.get_stream_record,
        }

    # -- lookups ----------------------------------------------------------------------------------------
    def _by_stream(self, stream_id: str) -> TableInfo:
        for name in self.store.tables.names():
            info = self.store.tables.get(name)
            if info is not None and info.stream_enabled and info.stream_id == stream_id:
                return info
        raise _no_stream()

    def _partition(self, info: TableInfo, shard_id: str) -> PartitionInfo | None:
        for p in self.store.stream.partitions(info.name):
            if p.partition_id == shard_id:
                return p
        return None

    # -- handlers ---------------------------------------------------------------------------------------
    def list_stream(self, body: bytes) -> Message:
        req = parse(pb.ListStreamRequest, body)
        names = self.store.tables.names()
        if req.HasField("table_name"):
            if req.table_name not in names:
                raise table_not_found()
            names = [req.table_name]
        resp = pb.ListStreamResponse()
        for name in names:
            info = self.store.tables.get(name)
            if info is not None and info.stream_enabled and info.stream_id:
                resp.streams.add(stream_id=info.stream_id, table_name=name,
                                 creation_time=info.stream_enabled_us)
        return resp

    def describe_stream(self, body: bytes) -> Message:
        req = parse(pb.DescribeStreamRequest, body)
        info = self._by_stream(req.stream_id)
        parts = self.store.stream.partitions(info.name)
        ids = [p.partition_id for p in parts]
        start = 0
        if req.HasField("inclusive_start_shard_id"):
            if req.inclusive_start_shard_id not in ids:
                raise _no_shard(req.inclusive_start_shard_id)
            start = ids.index(req.inclusive_start_shard_id)
        if req.HasField("shard_limit") and req.shard_limit <= 0:
            raise parameter_invalid("shard_limit must be positive.")
        limit = req.shard_limit if req.HasField("shard_limit") else len(parts)
        resp = pb.DescribeStreamResponse(
            stream_id=req.stream_id, expiration_time=max(1, int(info.stream_expiration_hours)),
            table_name=info.name, creation_time=info.stream_enabled_us, stream_status=pb.STREAM_ACTIVE,
        )
        for p in parts[start:start + limit]:
            shard = resp.shards.add(shard_id=p.partition_id)
            if p.parent_ids:
                shard.parent_id = p.parent_ids[0]
            if len(p.parent_ids) > 1:
                shard.parent_sibling_id = p.parent_ids[1]
        if start + limit < len(parts):
            resp.next_shard_id = parts[start + limit].partition_id
        return resp

    def get_shard_iterator(self, body: bytes) -> Message:
        req = parse(pb.GetShardIteratorRequest, body)
        info = self._by_stream(req.stream_id)
        if self._partition(info, req.shard_id) is None:
            raise _no_shard(req.shard_id)
        horizon = self.store.stream.retention_start_us(info.name) or 0
        if req.HasField("timestamp"):
            if req.timestamp < 0:
                raise parameter_invalid("timestamp must be non-negative microseconds.")
            if req.timestamp < horizon:
                raise trimmed_error()  # the point lies before the retention window
            since = req.timestamp
        else:
            since = horizon  # the oldest retained record (trimming itself is lazy)
        sql = "SELECT seq, ts_us FROM stream_log WHERE partition_id=? AND ts_us>=? ORDER BY seq LIMIT 1"
        rows = self.store.db.query(sql, (req.shard_id, since))
        if rows:
            after, stamp = rows[0][0] - 1, rows[0][1]
        else:
            # No retained record at/after the point: start after everything logged so far.
            after, stamp = self.store.stream.head_seq, self.clock.now_us() - CAUGHT_UP_MARGIN_US
        return pb.GetShardIteratorResponse(
            shard_iterator=encode_iterator(req.stream_id, req.shard_id, after, stamp))

    def get_stream_record(self, body: bytes) -> Message:
        req = parse(pb.GetStreamRecordRequest, body)
        stream_id, shard_id, after, stamp = decode_iterator(req.shard_iterator)
        try:
            info = self._by_stream(stream_id)
        except EmulatorError:
            raise trimmed_error() from None  # disabled or re-enabled stream: the old log is gone
        part = self._partition(info, shard_id)
        if part is None:
            raise trimmed_error()
        horizon = self.store.stream.retention_start_us(info.name) or 0
        if stamp < horizon:
            raise trimmed_error()
        if req.HasField("limit") and req.limit <= 0:
            raise parameter_invalid("limit must be positive.")
        limit = min(req.limit if req.HasField("limit") else DEFAULT_LIMIT, MAX_LIMIT)
        entries = self.store.stream.read(info.name, shard_id, after, limit + 1)
        more = len(entries) > limit
        entries = entries[:limit]
        resp = pb.GetStreamRecordResponse()
        size = 0
        taken = 0
        for e in entries:
            if taken and size + len(e.record) > MAX_RESPONSE_BYTES:
                more = True
                break
            resp.stream_records.add(action_type=e.action, record=e.record)
            size += len(e.record)
            taken += 1
        last_seq = entries[taken - 1].seq if taken else after
        last_ts = entries[taken - 1].timestamp_us if taken else stamp
        next_stamp = last_ts if more else max(last_ts, stamp, self.clock.now_us() - CAUGHT_UP_MARGIN_US)
        if not (part.closed and not more):  # a drained closed shard gets no next iterator
            resp.next_shard_iterator = encode_iterator(stream_id, shard_id, last_seq, next_stamp)
        set_consumed(resp.consumed, max(1, -(-size // 4096)), 0)
        resp.may_more_record = more
        return resp
