"""The tunnel data path: ReadRecords over snapshot ranges (base) and stream partitions (stream).

Records are pre-encoded PlainBuffer blobs in the store; this module only copies bytes into the response.
Authorisation happens under the service lock; the store reads run outside it so channels read in parallel.
"""

from __future__ import annotations

import threading
from typing import Any

import airflow_tablestore.emulator.tunnel.tokens as tokens
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.tunnel.checkpoints import ReadGrant
from airflow_tablestore.emulator.tunnel.errors import tunnel_expired
from airflow_tablestore.emulator.tunnel.service import TunnelService
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

MAX_READ_BYTES = 4 * 1024 * 1024
PUT_ROW = 1


class RecordReader:
    """Serves ``/tunnel/readrecords``: at most ``max_read_records`` records / ~4 MB per call."""

    def __init__(self, service: TunnelService) -> None:
        self.checkpoints = service.checkpoints
        self.expiry = service.expiry
        self.store = service.state.store
        self.limit = max(1, int(service.state.config.max_read_records))
        self._closed: set[tuple[str, str]] = set()
        self._closed_lock = threading.Lock()

    def read(self, tunnel_id: str, client_id: str, channel_id: str,
             token: str) -> tunnel_pb2.ReadRecordsResponse:
        """Validate, then read from the position ``token`` names (same token ⇒ same records)."""
        if token == tokens.FINISHED:
            raise parameter_invalid("channel already finished: do not read with token 'finished'")
        tag = tokens.binding(tunnel_id, channel_id)  # the token read and the next token share it
        pos = tokens.decode(token, tag)
        grant = self.checkpoints.grant_read(tunnel_id, client_id, channel_id)
        if isinstance(pos, tokens.BasePosition):
            if grant.kind != "BaseData":
                raise parameter_invalid("token is a base-data token but the channel is a stream channel")
            return self._read_base(grant, pos, tag)
        if grant.kind == "BaseData":
            raise parameter_invalid("token is a stream token but the channel is a base-data channel")
        return self._read_stream(grant, pos, tag)

    # -- base ------------------------------------------------------------------------------------------
    def _read_base(self, grant: ReadGrant, pos: tokens.BasePosition,
                   tag: bytes) -> tunnel_pb2.ReadRecordsResponse:
        if grant.snapshot_id is None:
            raise parameter_invalid(f"base channel {grant.channel_id} has no snapshot any more")
        limit = self.limit
        rows = self.store.snapshots.read(grant.snapshot_id, grant.range_start, grant.range_end,
                                         pos.after_key or None, limit + 1)
        resp = tunnel_pb2.ReadRecordsResponse()
        add = resp.records.add
        nbytes = 0
        taken = 0
        last_key = pos.after_key
        for key, record in rows:
            if taken >= limit or nbytes >= MAX_READ_BYTES:
                break
            add(action_type=PUT_ROW, record=record)
            nbytes += len(record)
            taken += 1
            last_key = key
        count = pos.count + taken
        if taken < len(rows):
            resp.next_token = tokens.encode_base(tokens.BasePosition(last_key, count), tag)
            resp.may_more_record = True
        else:
            resp.next_token = tokens.FINISHED
            resp.may_more_record = False
            self.checkpoints.note_finished(grant.tunnel_id, grant.channel_id, count, 0)
        return resp

    # -- stream ----------------------------------------------------------------------------------------
    def _read_stream(self, grant: ReadGrant, pos: tokens.StreamPosition,
                     tag: bytes) -> tunnel_pb2.ReadRecordsResponse:
        table, pid = grant.table_name, grant.partition_id
        if self.expiry.position_expired(table, pid, pos.consumed_ns):
            self.expiry.expire_tunnel(grant.tunnel_id)
            raise tunnel_expired()
        limit = self.limit
        # Taken before reading, under the store's write lock: every change stamped before this instant is
        # committed and so visible to the read below; a write still in flight gets a later stamp. An idle head
        # may therefore advance the consume point to it without passing an undelivered change.
        now_ns = self.store.db.committed_now_us() * 1000
        entries = self.store.stream.read(table, pid, pos.after_seq, limit + 1)
        resp = tunnel_pb2.ReadRecordsResponse()
        add = resp.records.add
        end_ns = grant.end_ns
        min_ts = pos.min_ts_us
        last_seq, consumed = pos.after_seq, pos.consumed_ns
        nbytes = taken = 0
        more = finished = False
        for entry in entries:
            if taken >= limit or nbytes >= MAX_READ_BYTES:
                more = True
                break
            ts = entry.timestamp_us
            if end_ns and ts * 1000 >= end_ns:
                finished = True
                break
            last_seq = entry.seq
            if ts < min_ts:
                continue
            record = entry.record
            add(action_type=int(entry.action), record=record)
            nbytes += len(record)
            taken += 1
            consumed = max(consumed, ts * 1000)
        else:
            more = len(entries) > limit
        if not more and not finished:
            if end_ns and now_ns >= end_ns:
                finished = True
            elif self._partition_closed(table, pid):
                if self.store.stream.read(table, pid, last_seq, 1):
                    more = True
                else:
                    finished = True
            else:
                consumed = max(consumed, now_ns)  # idle head: consumed up to "now"
        count = pos.count + taken
        if finished:
            resp.next_token = tokens.FINISHED
            self.checkpoints.note_finished(grant.tunnel_id, grant.channel_id, count, consumed)
        else:
            resp.next_token = tokens.encode_stream(tokens.StreamPosition(last_seq, min_ts, consumed, count),
                                                   tag)
        resp.may_more_record = more
        return resp

    def _partition_closed(self, table: str, pid: str) -> bool:
        key = (table, pid)
        with self._closed_lock:
            if key in self._closed:
                return True
        closed = any(str(p.partition_id) == pid and p.closed for p in self.store.stream.partitions(table))
        if closed:
            with self._closed_lock:
                self._closed.add(key)
        return closed
