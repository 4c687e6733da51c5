"""The tunnel data path: ReadRecords over snapshot ranges (base) and stream partitions (stream).

Records are pre-encoded PlainBuffer blobs in the store; this module only copies bytes into the response.
Authorisation happens under the service lock; the store reads run outside it so channels read in parallel.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import airflow_tablestore.emulator.tunnel.tokens as tokens
from airflow_tablestore.emulator.codec.format import HEADER
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.tunnel.answer import RecordEntries, put_row_entries, stream_entries
from airflow_tablestore.emulator.tunnel.checkpoints import ReadGrant
from airflow_tablestore.emulator.tunnel.errors import tunnel_expired
from airflow_tablestore.emulator.tunnel.service import TunnelService
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

MAX_READ_BYTES = 4 * 1024 * 1024
PUT_ROW = 1


class _StreamPage(NamedTuple):
    """A stream answer's records and where they leave the channel."""

    out: RecordEntries
    taken: int
    last_seq: int
    consumed_ns: int
    more: bool  # records past the answer (max_read_records or ~4 MB reached)
    finished: bool  # a record at or past the channel's end was reached


class RecordReader:
    """Serves ``/tunnel/readrecords``: at most ``max_read_records`` records / ~4 MB per call."""

    def __init__(self, service: TunnelService) -> None:
        self.checkpoints = service.checkpoints
        self.expiry = service.expiry
        self.store = service.state.store
        self.limit = max(1, int(service.state.config.max_read_records))
        self._closed: set[tuple[str, str]] = set()
        self._closed_lock = threading.Lock()

    def read(self, tunnel_id: str, client_id: str, channel_id: str, token: str) -> bytes:
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
    def _read_base(self, grant: ReadGrant, pos: tokens.BasePosition, tag: bytes) -> bytes:
        if grant.snapshot_id is None:
            raise parameter_invalid(f"base channel {grant.channel_id} has no snapshot any more")
        limit = self.limit
        run = self.store.snapshots.run(grant.snapshot_id, put_row_entries)
        if run is not None:
            i, stop = run.bounds(grant.range_start, grant.range_end, pos.after_key or None)
            taken = run.taken(i, stop, limit, MAX_READ_BYTES)
            if taken is not None:
                entries = RecordEntries()
                entries.add_entries(run.view(i, i + taken))
                return self._base_answer(grant, pos, tag, entries, taken,
                                         run.keys[i + taken - 1] if taken else pos.after_key, i + taken < stop)
        keys, bodies = self.store.snapshots.read(grant.snapshot_id, grant.range_start, grant.range_end,
                                                 pos.after_key or None, limit + 1)
        entries = RecordEntries()
        taken = min(len(bodies), limit)
        if sum(map(len, bodies[:taken - 1])) + len(HEADER) * (taken - 1) < MAX_READ_BYTES:
            entries.extend(PUT_ROW, bodies[:taken] if taken < len(bodies) else bodies, headed=False)
        else:  # the answer ends at ~4 MB instead
            taken = 0
            for body in bodies:
                if entries.nbytes >= MAX_READ_BYTES:
                    break
                entries.add(PUT_ROW, body, headed=False)
                taken += 1
        return self._base_answer(grant, pos, tag, entries, taken, keys[taken - 1] if taken else pos.after_key,
                                 taken < len(keys))

    def _base_answer(self, grant: ReadGrant, pos: tokens.BasePosition, tag: bytes, entries: RecordEntries,
                     taken: int, last_key: bytes, more: bool) -> bytes:
        count = pos.count + taken
        if more:
            next_token = tokens.encode_base(tokens.BasePosition(last_key, count), tag)
        else:
            next_token = tokens.FINISHED
            self.checkpoints.note_finished(grant.tunnel_id, grant.channel_id, count, 0)
        return entries.response(next_token, more)

    # -- stream ----------------------------------------------------------------------------------------
    def _read_stream(self, grant: ReadGrant, pos: tokens.StreamPosition, tag: bytes) -> bytes:
        table, pid = grant.table_name, grant.partition_id
        if self.expiry.position_expired(table, pid, pos.consumed_ns):
            self.expiry.expire_tunnel(grant.tunnel_id)
            raise tunnel_expired()
        # Taken before reading, under the store's write lock: every change stamped before this instant is
        # committed and so visible to the read below; a write still in flight gets a later stamp. An idle head
        # may therefore advance the consume point to it without passing an undelivered change.
        now_ns = self.store.db.committed_now_us() * 1000
        page = self._stream_from_memory(grant, pos) or self._stream_from_log(grant, pos)
        out, taken, last_seq, consumed, more, finished = page
        if not more and not finished:
            if grant.end_ns and now_ns >= grant.end_ns:
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
            next_token = tokens.FINISHED
            self.checkpoints.note_finished(grant.tunnel_id, grant.channel_id, count, consumed)
        else:
            next_token = tokens.encode_stream(tokens.StreamPosition(last_seq, pos.min_ts_us, consumed, count),
                                              tag)
        return out.response(next_token, more)

    def _stream_from_memory(self, grant: ReadGrant, pos: tokens.StreamPosition) -> _StreamPage | None:
        """The answer from the partition's cached run when none of its records is skipped or past the end
        (then it is what :meth:`_stream_from_log` gives); else None."""
        run = self.store.stream.run(grant.table_name, grant.partition_id, stream_entries)
        if run is None or run.stamps is None:
            return None
        i, stop = run.bounds(None, None, pos.after_seq)
        n = run.taken(i, stop, self.limit, MAX_READ_BYTES)
        if n is None:
            return None
        out = RecordEntries()
        if not n:
            return _StreamPage(out, 0, pos.after_seq, pos.consumed_ns, False, False)
        stamps = run.stamps[i:i + n]
        newest = max(stamps)
        if min(stamps) < pos.min_ts_us or (grant.end_ns and newest * 1000 >= grant.end_ns):
            return None
        out.add_entries(run.view(i, i + n))
        return _StreamPage(out, n, run.keys[i + n - 1], max(pos.consumed_ns, newest * 1000), stop - i > self.limit,
                           False)

    def _stream_from_log(self, grant: ReadGrant, pos: tokens.StreamPosition) -> _StreamPage:
        """The answer read from the stream log: records after the position, skipping those before its
        ``min_ts_us``, up to the channel's end, ``max_read_records`` or ~4 MB."""
        limit = self.limit
        entries = self.store.stream.read(grant.table_name, grant.partition_id, pos.after_seq, limit + 1)
        out = RecordEntries()
        end_ns = grant.end_ns
        min_ts = pos.min_ts_us
        last_seq, consumed = pos.after_seq, pos.consumed_ns
        taken = 0
        more = finished = False
        head = entries[:limit]
        stamps = [entry.timestamp_us for entry in head]
        records = [entry.record for entry in head]
        if (head and min(stamps) >= min_ts and not (end_ns and max(stamps) * 1000 >= end_ns)
                and sum(map(len, records[:-1])) < MAX_READ_BYTES):
            # the common case, a whole answer of changes none of which is skipped or past the end
            out.extend_mixed([entry.action for entry in head], records)
            taken, last_seq = len(head), head[-1].seq
            consumed = max(consumed, max(stamps) * 1000)
        for entry in entries[taken:] if taken else entries:
            if taken >= limit or out.nbytes >= MAX_READ_BYTES:
                more = True
                break
            ts = entry.timestamp_us
            if end_ns and ts * 1000 >= end_ns:
                finished = True
                break
            last_seq = entry.seq
            if ts < min_ts:
                continue
            out.add(entry.action, entry.record)
            taken += 1
            consumed = max(consumed, ts * 1000)
        else:
            more = len(entries) > limit
        self.store.stream.served(grant.table_name, grant.partition_id, taken)
        return _StreamPage(out, taken, last_seq, consumed, more, finished)

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
