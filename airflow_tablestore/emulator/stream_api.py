"""The public Stream API (ListStream, DescribeStream, GetShardIterator, GetStreamRecord) over the stream log.

Shards are the store's stream partitions (a split closes a shard and adds two children with ``parent_id``).
Shard iterators are self-describing opaque strings: base64 of ``{"s": stream_id, "p": shard_id, "a": seq}``
where ``a`` is the last consumed log position.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid, table_not_found
from airflow_tablestore.emulator.storage import Store, TableInfo
from airflow_tablestore.emulator.table_api import parse, set_consumed
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def _trimmed() -> EmulatorError:
    return EmulatorError("OTSTrimmedDataAccess", "Requested stream data is already trimmed or does not exist.", 404)


def _no_stream() -> EmulatorError:
    return EmulatorError("OTSObjectNotExist", "Requested stream does not exist.", 404)


class StreamApi:
    """Stream API handlers on top of a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def handlers(self) -> dict[str, Callable[[bytes], Message]]:
        return {
            "/ListStream": self._ListStream,
            "/DescribeStream": self._DescribeStream,
            "/GetShardIterator": self._GetShardIterator,
            "/GetStreamRecord": self._GetStreamRecord,
        }

    def _by_stream(self, stream_id: str) -> TableInfo:
        for name in self.store.list_tables():
            info = self.store.get_table_info(name)
            if info is not None and info.stream_enabled and info.stream_id == stream_id:
                return info
        raise _no_stream()

    def _ListStream(self, body: bytes) -> Message:
        req = parse(pb.ListStreamRequest, body)
        names = self.store.list_tables()
        if req.HasField("table_name"):
            if req.table_name not in names:
                raise table_not_found()
            names = [req.table_name]
        resp = pb.ListStreamResponse()
        for name in names:
            info = self.store.get_table_info(name)
            if info is not None and info.stream_enabled and info.stream_id:
                resp.streams.add(stream_id=info.stream_id, table_name=name, creation_time=info.stream_enabled_us)
        return resp

    def _DescribeStream(self, body: bytes) -> Message:
        req = parse(pb.DescribeStreamRequest, body)
        info = self._by_stream(req.stream_id)
        parts = self.store.stream_partitions(info.name)
        ids = [p.partition_id for p in parts]
        start = 0
        if req.HasField("inclusive_start_shard_id"):
            if req.inclusive_start_shard_id not in ids:
                raise parameter_invalid(f"Shard does not exist: {req.inclusive_start_shard_id}.")
            start = ids.index(req.inclusive_start_shard_id)
        limit = req.shard_limit if req.HasField("shard_limit") and req.shard_limit > 0 else len(parts)
        resp = pb.DescribeStreamResponse(
            stream_id=req.stream_id, expiration_time=int(info.stream_expiration_hours), table_name=info.name,
            creation_time=info.stream_enabled_us, stream_status=pb.STREAM_ACTIVE,
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

    def _GetShardIterator(self, body: bytes) -> Message:
        req = parse(pb.GetShardIteratorRequest, body)
        info = self._by_stream(req.stream_id)
        if req.shard_id not in {p.partition_id for p in self.store.stream_partitions(info.name)}:
            raise EmulatorError("OTSObjectNotExist", f"Requested shard does not exist: {req.shard_id}.", 404)
        after = 0
        if req.HasField("timestamp"):
            rows = self.store.query(
                "SELECT seq FROM stream_log WHERE partition_id=? AND ts_us>=? ORDER BY seq LIMIT 1",
                (req.shard_id, req.timestamp),
            )
            after = rows[0][0] - 1 if rows else self.store.stream_head_seq()
        return pb.GetShardIteratorResponse(shard_iterator=_iterator(req.stream_id, req.shard_id, after))

    def _GetStreamRecord(self, body: bytes) -> Message:
        req = parse(pb.GetStreamRecordRequest, body)
        stream_id, shard_id, after = _parse_iterator(req.shard_iterator)
        try:
            info = self._by_stream(stream_id)
        except EmulatorError:
            raise _trimmed() from None
        parts = {p.partition_id: p for p in self.store.stream_partitions(info.name)}
        part = parts.get(shard_id)
        if part is None:
            raise _trimmed()
        limit = req.limit if req.HasField("limit") and req.limit > 0 else DEFAULT_LIMIT
        limit = min(limit, MAX_LIMIT)
        entries = self.store.read_stream(info.name, shard_id, after, limit + 1)
        more = len(entries) > limit
        entries = entries[:limit]
        resp = pb.GetStreamRecordResponse()
        size = 0
        for e in entries:
            resp.stream_records.add(action_type=e.action, record=e.record)
            size += len(e.record)
        last = entries[-1].seq if entries else after
        if not (part.closed and not more):
            resp.next_shard_iterator = _iterator(stream_id, shard_id, last)
        set_consumed(resp.consumed, max(1, -(-size // 4096)), 0)
        resp.may_more_record = more
        return resp


def _iterator(stream_id: str, shard_id: str, after_seq: int) -> str:
    raw = json.dumps({"s": stream_id, "p": shard_id, "a": after_seq}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _parse_iterator(text: str) -> tuple[str, str, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(text.encode("ascii")))
        return str(data["s"]), str(data["p"]), int(data["a"])
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeError):
        raise parameter_invalid("Invalid shard iterator.") from None
