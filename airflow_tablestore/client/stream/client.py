"""``StreamClient``: the raw Stream API (ListStream, DescribeStream, GetShardIterator, GetStreamRecord).

One method per RPC plus the pagination loops (``next_shard_id``, ``next_token``); nothing stateful — the
lease-based consumer is :mod:`.worker`. Times are microseconds. Errors are the typed exceptions of
:mod:`airflow_tablestore.client.errors`: an unknown stream or shard is :class:`NotFoundError`, an iterator
into data removed by the retention (or into a disabled/re-enabled stream) is :class:`TrimmedDataError`. Every
call is a read and is retried by the transport on 5xx/network errors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from airflow_tablestore.client.base_client import BaseClient
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import Record
from airflow_tablestore.client.records import decode_records
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

MAX_TOKEN_ROUNDS = 10_000


class StreamStatus(enum.StrEnum):
    ENABLING = "ENABLING"
    ACTIVE = "ACTIVE"


_STATUS = {1: StreamStatus.ENABLING, 2: StreamStatus.ACTIVE}


@dataclass(frozen=True)
class StreamInfo:
    """A stream as listed by ListStream. ``creation_time_us``: when the stream was enabled (µs)."""

    stream_id: str
    table_name: str
    creation_time_us: int


@dataclass(frozen=True)
class StreamShard:
    """One shard. A split child has ``parent_id``; a merge child has ``parent_id`` and
    ``parent_sibling_id``."""

    shard_id: str
    parent_id: str | None = None
    parent_sibling_id: str | None = None

    @property
    def parent_ids(self) -> tuple[str, ...]:
        """The parents that must be fully consumed before this shard (0, 1 or 2)."""
        return tuple(p for p in (self.parent_id, self.parent_sibling_id) if p)


@dataclass(frozen=True)
class StreamDescription:
    """DescribeStream with every page of shards. ``expiration_hours``: the log retention."""

    stream_id: str
    table_name: str
    creation_time_us: int
    expiration_hours: int
    status: StreamStatus
    shards: tuple[StreamShard, ...]

    def shard(self, shard_id: str) -> StreamShard | None:
        return next((s for s in self.shards if s.shard_id == shard_id), None)


class StreamRecordsResult(NamedTuple):
    """One GetStreamRecord answer. ``next_iterator`` is None once a closed shard is fully read; with an open
    shard an empty ``records`` means "caught up, poll again later"."""

    records: list[Record]
    next_iterator: str | None
    may_more: bool | None
    size_bytes: int


class StreamClient(BaseClient):
    """Stream API client. Build it like ``TableClient`` or from an existing ``transport``."""

    def _call(self, api: str, request: Any, response_cls: Any) -> Any:
        return self._transport.call(f"/{api}", request, response_cls, idempotent=True)

    # -- RPCs ---------------------------------------------------------------------------------------
    def list_streams(self, table: str | None = None) -> list[StreamInfo]:
        """Enabled streams of the instance, or of ``table`` (0 or 1 entries; unknown table →
        NotFoundError)."""
        request = table_pb2.ListStreamRequest()
        if table is not None:
            request.table_name = table
        response = self._call("ListStream", request, table_pb2.ListStreamResponse)
        return [StreamInfo(s.stream_id, s.table_name, s.creation_time) for s in response.streams]

    def stream_id_of(self, table: str) -> str | None:
        """The current stream id of ``table``, None when its stream is disabled."""
        streams = self.list_streams(table)
        return streams[0].stream_id if streams else None

    def describe_stream(self, stream_id: str, *, shard_limit: int | None = None) -> StreamDescription:
        """Stream status and all shards with their lineage (follows ``next_shard_id``; ``shard_limit`` is the
        page size)."""
        shards: list[StreamShard] = []
        start: str | None = None
        while True:
            request = table_pb2.DescribeStreamRequest(stream_id=stream_id)
            if start is not None:
                request.inclusive_start_shard_id = start
            if shard_limit is not None:
                request.shard_limit = shard_limit
            response = self._call("DescribeStream", request, table_pb2.DescribeStreamResponse)
            for s in response.shards:
                shards.append(StreamShard(s.shard_id, s.parent_id or None, s.parent_sibling_id or None))
            if not response.HasField("next_shard_id") or not response.next_shard_id:
                break
            if response.next_shard_id == start:
                raise TablestoreClientError(f"DescribeStream pagination did not advance at shard {start!r}")
            start = response.next_shard_id
        return StreamDescription(
            stream_id=response.stream_id or stream_id,
            table_name=response.table_name,
            creation_time_us=response.creation_time,
            expiration_hours=response.expiration_time,
            status=_STATUS.get(response.stream_status, StreamStatus.ACTIVE),
            shards=tuple(shards),
        )

    def get_shard_iterator(self, stream_id: str, shard_id: str, timestamp_us: int | None = None) -> str:
        """An iterator at the oldest retained record of the shard, or at the first record whose sequence
        timestamp is ≥ ``timestamp_us`` (follows ``next_token`` until positioned)."""
        if timestamp_us is not None and (isinstance(timestamp_us, bool) or timestamp_us < 0):
            raise TablestoreClientError(
                f"timestamp_us must be non-negative microseconds, got {timestamp_us!r}"
            )
        token: str | None = None
        for _ in range(MAX_TOKEN_ROUNDS):
            request = table_pb2.GetShardIteratorRequest(stream_id=stream_id, shard_id=shard_id)
            if timestamp_us is not None:
                request.timestamp = timestamp_us
            if token:
                request.token = token
            response = self._call("GetShardIterator", request, table_pb2.GetShardIteratorResponse)
            token = response.next_token if response.HasField("next_token") else None
            if not token:
                return str(response.shard_iterator)
        raise TablestoreClientError(f"GetShardIterator for shard {shard_id!r} did not position after "
                                    f"{MAX_TOKEN_ROUNDS} rounds")

    def get_stream_records(self, iterator: str, limit: int | None = None) -> StreamRecordsResult:
        """Up to ``limit`` records after ``iterator`` (the service's default when None), in shard order."""
        if not iterator:
            raise TablestoreClientError("get_stream_records needs a shard iterator (got an empty one)")
        request = table_pb2.GetStreamRecordRequest(shard_iterator=iterator)
        if limit is not None:
            if limit <= 0:
                raise TablestoreClientError(f"limit must be positive, got {limit}")
            request.limit = limit
        response, size = self._transport.call_sized(
            "/GetStreamRecord", request, table_pb2.GetStreamRecordResponse, idempotent=True
        )
        records = decode_records(response.stream_records)
        next_iterator = response.next_shard_iterator if response.HasField("next_shard_iterator") else None
        may_more = response.may_more_record if response.HasField("may_more_record") else None
        return StreamRecordsResult(records, next_iterator or None, may_more, size)
