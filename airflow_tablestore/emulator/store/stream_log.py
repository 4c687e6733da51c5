"""Stream log of the emulator store: appending records, partitions (split/merge), retention and reading.

Every row write appends its record in the write's own transaction (:meth:`StreamLog.append`); seqs are
global, increase by one and are never reused. Records are routed to the open partition whose hash range
covers :func:`~.model.partition_hash` of the first PK value. Retention is applied lazily
(:meth:`StreamLog.trim`) before reads; the Stream API and the tunnel service build on the contract in the
methods' docstrings.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.store.core import StoreCore, WriteTxn
from airflow_tablestore.emulator.store.model import (
    ACTION_DELETE,
    HASH_SPACE,
    PartitionInfo,
    StreamEntry,
    TableInfo,
    partition_hash,
)
from airflow_tablestore.emulator.store.read_cache import EncodedRun, Frame, ReadCache

log = logging.getLogger(__name__)


_as_entry = partial(tuple.__new__, StreamEntry)  # a row as a StreamEntry, without a Python call per row


class StreamLog:
    """Stream partitions, the stream log and its retention, over the store's shared :class:`StoreCore`."""

    def __init__(self, core: StoreCore, cache: ReadCache, *, partitions: int = 4,
                 default_retention_hours: int = 168) -> None:
        self.core = core
        self.cache = cache
        self.partitions_per_stream = partitions
        self.default_retention_hours = default_retention_hours
        """Retention of a new stream without an expiration, and the longest one CreateTable accepts."""
        self._last_trim: dict[str, float] = {}

    # -- appending --------------------------------------------------------------------------------------
    def append(self, txn: WriteTxn, info: TableInfo, action: int, pk: Sequence[tuple[str, Any]],
               cells: Sequence[tuple[str, Any, int | None, int | None]]) -> int | None:
        """Append one stream record for a row write inside ``txn`` (no-op when the table has no stream).

        ``cells`` = ``(name, value, op, ts)`` as they go into the PlainBuffer record; returns the record's
        seq.
        """
        if not info.stream_enabled or not info.stream_id:
            return None
        pid = self._partition_for(info.stream_id, partition_hash(pk[0][1]))
        ts_us = self.core.clock.now_us()
        self.core.head_seq += 1
        seq = self.core.head_seq
        record = encode_row(
            list(pk), list(cells), delete_marker=action == ACTION_DELETE, seq=(0, ts_us, 0)
        )
        txn.changed.add(("stream", info.stream_id))
        txn.conn.execute(
            "INSERT INTO stream_log(seq, stream_id, partition_id, ts_us, row_index, action, record) "
            "VALUES(?,?,?,?,?,?,?)",
            (seq, info.stream_id, pid, ts_us, 0, action, record),
        )
        return seq

    # -- stream partitions ------------------------------------------------------------------------------
    def new_stream(self, txn: WriteTxn, meta: dict[str, Any]) -> None:
        """Give the table ``meta`` a new stream id and its first partitions, inside ``txn``."""
        stream = dict(meta.get("stream") or {})
        sid = f"{meta['name']}_{uuid.uuid4().hex[:12]}"
        stream.update(stream_id=sid, enabled=True, enabled_us=self.core.clock.now_us())
        stream.setdefault("expiration", self.default_retention_hours)
        meta["stream"] = stream
        n = self.partitions_per_stream
        bounds = [i * HASH_SPACE // n for i in range(n + 1)]
        for i in range(n):
            self._add_partition(txn, sid, meta["name"], f"{sid}-{i}", bounds[i], bounds[i + 1], ())

    def _add_partition(self, txn: WriteTxn, sid: str, table: str, pid: str, lo: int, hi: int,
                       parents: tuple[str, ...]) -> None:
        txn.meta_changed = True
        txn.execute(
            "INSERT INTO stream_partitions(partition_id, stream_id, table_name, hash_lo, hash_hi, parents, "
            "closed, created_seq) VALUES(?,?,?,?,?,?,0,?)",
            (pid, sid, table, lo, hi, json.dumps(list(parents)), self.core.head_seq),
        )
        self.core.partition_cache.setdefault(sid, []).append((lo, hi, pid))

    def drop_stream(self, txn: WriteTxn, sid: str | None) -> None:
        """Delete a stream's log and partitions, inside ``txn``."""
        txn.meta_changed = True
        if not sid:
            return
        txn.changed.add(("stream", sid))
        txn.execute("DELETE FROM stream_log WHERE stream_id=?", (sid,))
        txn.execute("DELETE FROM stream_partitions WHERE stream_id=?", (sid,))
        self.core.partition_cache.pop(sid, None)

    def _partition_for(self, sid: str, h: int) -> str:
        for lo, hi, pid in self.core.partition_cache.get(sid, ()):
            if lo <= h < hi:
                return pid
        raise RuntimeError(f"no open stream partition covers hash {h} of stream {sid}")

    def partitions(self, table: str) -> list[PartitionInfo]:
        """All partitions (open and closed) of the table's current stream, in creation order."""
        info = self.core.table_cache.get(table)
        if info is None or not info.stream_id:
            return []
        rows = self.core.query(
            "SELECT partition_id, parents, closed, created_seq, closed_seq, hash_lo, hash_hi "
            "FROM stream_partitions WHERE stream_id=? ORDER BY rowid",
            (info.stream_id,),
        )
        return [PartitionInfo(r[0], tuple(json.loads(r[1])), bool(r[2]), r[3], r[4], r[5], r[6])
                for r in rows]

    def split_partition(self, table: str, partition_id: str | None = None) -> list[PartitionInfo]:
        """Close an open partition (default: the first) and create two children splitting its hash range.

        New writes for the hash range go to the children; the parent's records stay readable.
        """
        with self.core.write() as txn:
            info = self.core.table_cache.get(table)
            if info is None or not info.stream_id:
                raise KeyError(table)
            sid = info.stream_id
            opened = self.core.partition_cache.get(sid, [])
            choice = [p for p in opened if partition_id is None or p[2] == partition_id]
            if not choice:
                raise KeyError(partition_id or table)
            lo, hi, pid = choice[0]
            txn.execute("UPDATE stream_partitions SET closed=1, closed_seq=? WHERE partition_id=?",
                        (self.core.head_seq, pid))
            self.core.partition_cache[sid] = [p for p in opened if p[2] != pid]
            mid = (lo + hi) // 2
            n = txn.execute("SELECT COUNT(*) FROM stream_partitions WHERE stream_id=?", (sid,))[0][0]
            a, b = f"{sid}-{n}", f"{sid}-{n + 1}"
            self._add_partition(txn, sid, table, a, lo, mid, (pid,))
            self._add_partition(txn, sid, table, b, mid, hi, (pid,))
        return [p for p in self.partitions(table) if p.partition_id in (a, b)]

    def merge_partitions(self, table: str, first_id: str | None = None,
                         second_id: str | None = None) -> PartitionInfo:
        """Close two open partitions with adjacent hash ranges (default: the first adjacent pair) and create
        one child covering both, with ``parent_ids = (first, second)`` (first = lower hash range)."""
        with self.core.write() as txn:
            info = self.core.table_cache.get(table)
            if info is None or not info.stream_id:
                raise KeyError(table)
            sid = info.stream_id
            opened = sorted(self.core.partition_cache.get(sid, []))
            pairs = [(x, y) for x, y in zip(opened, opened[1:], strict=False) if x[1] == y[0]]
            if first_id is not None or second_id is not None:
                wanted = {first_id, second_id} - {None}
                pairs = [(x, y) for x, y in pairs if wanted <= {x[2], y[2]}]
            if not pairs:
                raise KeyError(f"no adjacent open partitions to merge: {first_id}, {second_id}")
            low, high = pairs[0]
            for part in (low, high):
                txn.execute("UPDATE stream_partitions SET closed=1, closed_seq=? WHERE partition_id=?",
                            (self.core.head_seq, part[2]))
            self.core.partition_cache[sid] = [p for p in self.core.partition_cache.get(sid, [])
                                              if p[2] not in (low[2], high[2])]
            n = txn.execute("SELECT COUNT(*) FROM stream_partitions WHERE stream_id=?", (sid,))[0][0]
            child = f"{sid}-{n}"
            self._add_partition(txn, sid, table, child, low[0], high[1], (low[2], high[2]))
        return next(p for p in self.partitions(table) if p.partition_id == child)

    # -- retention --------------------------------------------------------------------------------------
    def forget_trim(self, stream_id: str) -> None:
        """Trim the stream at its next read again (its retention changed)."""
        self._last_trim.pop(stream_id, None)

    def retention_start_us(self, table: str) -> int | None:
        """Records older than this (µs) are trimmed; None when the table has no stream."""
        info = self.core.table_cache.get(table)
        if info is None or not info.stream_enabled:
            return None
        return self.core.clock.now_us() - int(info.raw["stream"]["expiration"] * 3600 * 1_000_000)

    def trim(self, table: str, force: bool = False) -> int:
        """Delete records older than the stream's retention (lazily, at most once a second unless forced)."""
        info = self.core.table_cache.get(table)
        if info is None or not info.stream_id:
            return 0
        now = time.monotonic()
        if not force and now - self._last_trim.get(info.stream_id, 0.0) < 1.0:
            return 0
        self._last_trim[info.stream_id] = now
        horizon = self.retention_start_us(table)
        with self.core.write() as txn:
            for pid, max_seq in txn.execute(
                "SELECT partition_id, MAX(seq) FROM stream_log WHERE stream_id=? AND ts_us<? "
                "GROUP BY partition_id",
                (info.stream_id, horizon),
            ):
                txn.execute("UPDATE stream_partitions SET trimmed_seq=MAX(trimmed_seq, ?) "
                            "WHERE partition_id=?",
                            (max_seq, pid))
            cur = txn.conn.execute("DELETE FROM stream_log WHERE stream_id=? AND ts_us<?",
                                   (info.stream_id, horizon))
            if cur.rowcount:
                txn.changed.add(("stream", info.stream_id))
                log.info("trimmed %d expired stream records of table %s", cur.rowcount, table)
            return cur.rowcount

    def trimmed_seq(self, table: str, partition_id: str) -> int:
        """Highest seq of the partition removed by retention (0 if none): positions below it are gone."""
        self.trim(table)
        rows = self.core.query("SELECT trimmed_seq FROM stream_partitions WHERE partition_id=?",
                               (partition_id,))
        return int(rows[0][0]) if rows else 0

    # -- reading ----------------------------------------------------------------------------------------
    def latest_stamp_us(self) -> int:
        """The time stamp of the newest stream record still stored (0 if none): the clock must not go below
        it."""
        rows = self.core.query("SELECT ts_us FROM stream_log ORDER BY seq DESC LIMIT 1")
        return int(rows[0][0]) if rows else 0

    @property
    def head_seq(self) -> int:
        """The seq of the newest record ever appended (0 if none); seqs are global and never reused (the store
        core's ``head_seq``, read-only here)."""
        return self.core.head_seq

    def read(self, table: str, partition_id: str, after_seq: int, limit: int) -> list[StreamEntry]:
        """Up to ``limit`` retained records of one partition with ``seq > after_seq``, in seq order."""
        self.trim(table)
        rows = self.core.query(
            "SELECT seq, ts_us, action, record FROM stream_log WHERE partition_id=? AND seq>? "
            "ORDER BY seq LIMIT ?",
            (partition_id, after_seq, limit),
        )
        return list(map(_as_entry, rows))  # the columns in field order

    def run(self, table: str, partition_id: str, frame: Frame) -> EncodedRun | None:
        """The partition's retained records from memory (:mod:`.read_cache`), or None: read them with
        :meth:`read`."""
        self.trim(table)
        info = self.core.table_cache.get(table)
        if info is None or not info.stream_id:
            return None
        return self.cache.stream(info.stream_id, partition_id, frame)

    def served(self, table: str, partition_id: str, records: int) -> None:
        """Count records a read took from the log (not :meth:`run`): enough of them build the partition's run."""
        info = self.core.table_cache.get(table)
        if info is not None and info.stream_id:
            self.cache.served(("stream", info.stream_id), partition_id, records)

    def oldest_retained_us(self, table: str, partition_id: str) -> int | None:
        """Timestamp (µs) of the oldest retained record of the partition, None when it holds none."""
        self.trim(table)
        rows = self.core.query("SELECT ts_us FROM stream_log WHERE partition_id=? ORDER BY seq LIMIT 1",
                               (partition_id,))
        return rows[0][0] if rows else None

    def oldest_retained_seq(self, table: str, partition_id: str) -> int | None:
        """Seq of the oldest retained record of the partition, None when it holds none."""
        self.trim(table)
        rows = self.core.query("SELECT seq FROM stream_log WHERE partition_id=? ORDER BY seq LIMIT 1",
                               (partition_id,))
        return rows[0][0] if rows else None
