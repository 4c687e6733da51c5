"""Snapshots of the emulator store: frozen copies of a table's rows, read back in key ranges.

A snapshot is taken in one write transaction of the shared :class:`~.core.StoreCore`, so it is atomic
w.r.t. writes and records the stream head seq: replay = snapshot + stream records with a larger seq. The
tunnel service's base-data channels read these.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow_tablestore.emulator.codec.encode import encode_row_body
from airflow_tablestore.emulator.store.core import StoreCore
from airflow_tablestore.emulator.store.keys import decode_key
from airflow_tablestore.emulator.store.model import (
    USABLE_SQL,
    SnapshotInfo,
    TableInfo,
    load_columns,
    usable_params,
    visible_columns,
)
from airflow_tablestore.emulator.store.read_cache import EncodedRun, Frame, ReadCache

log = logging.getLogger(__name__)

_DROP_CHUNK = 20_000  # snapshot rows deleted per transaction


class SnapshotStore:
    """Create, size, read and drop table snapshots, over the store's shared :class:`StoreCore`."""

    def __init__(self, core: StoreCore, cache: ReadCache) -> None:
        self.core = core
        self.cache = cache
        self._schemas: dict[int, TableInfo] = {}  # a snapshot's schema never changes; a dropped one is not read

    def _schema(self, snapshot_id: int) -> TableInfo:
        info = self._schemas.get(snapshot_id)
        if info is None:
            meta_rows = self.core.query("SELECT schema FROM snapshots WHERE sid=?", (snapshot_id,))
            if not meta_rows:
                raise KeyError(snapshot_id)
            info = self._schemas[snapshot_id] = TableInfo.from_meta(json.loads(meta_rows[0][0]))
        return info

    def create(self, table: str) -> SnapshotInfo:
        """Copy the table's rows atomically w.r.t. writes; replay = snapshot + records with seq >
        stream_seq."""
        with self.core.write() as txn:
            info = self.core.table_cache.get(table)
            if info is None:
                raise KeyError(table)
            ts_us = self.core.clock.now_us()
            txn.conn.execute(
                "INSERT INTO snapshots(table_name, tid, stream_seq, ts_us, schema) VALUES(?,?,?,?,?)",
                (table, info.table_id, self.core.head_seq, ts_us, json.dumps(info.raw)),
            )
            sid = txn.execute("SELECT last_insert_rowid()")[0][0]
            txn.conn.execute(
                "INSERT INTO snap_rows(sid, key, data, rec, nv, oldest) "
                "SELECT ?, key, data, rec, nv, oldest FROM rows WHERE tid=?",
                (sid, info.table_id))
            log.info("snapshot %s of table %s taken at stream seq %s", sid, table, self.core.head_seq)
            return SnapshotInfo(sid, self.core.head_seq, ts_us)

    def ranges(self, snapshot_id: int, rows_per_range: int) -> list[tuple[bytes | None, bytes | None]]:
        """Key ranges ``[start, end)`` (None = unbounded) covering the snapshot, ~rows_per_range rows
        each."""
        keys = [r[0] for r in self.core.query(
            "SELECT key FROM (SELECT key, row_number() OVER (ORDER BY key) AS rn FROM snap_rows WHERE sid=?) "
            "WHERE rn > 1 AND (rn - 1) % ? = 0 ORDER BY key",
            (snapshot_id, max(1, rows_per_range)),
        )]
        bounds: list[bytes | None] = [None, *keys, None]
        return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]

    def row_count(self, snapshot_id: int, start_key: bytes | None = None,
                           end_key: bytes | None = None) -> int:
        """Number of snapshot rows in ``[start_key, end_key)``."""
        sql, params = self._snap_where(snapshot_id, start_key, end_key, None)
        return int(self.core.query("SELECT COUNT(*) FROM snap_rows WHERE " + sql, params)[0][0])

    @staticmethod
    def _snap_where(sid: int, start: bytes | None, end: bytes | None,
                    after: bytes | None) -> tuple[str, list[Any]]:
        sql = "sid=?"
        params: list[Any] = [sid]
        # One lower bound only: given both, SQLite seeks the index to one of them and filters the other row by
        # row, so a read deep into a channel scanned every row before its position (O(n^2) over a channel).
        if after is not None and (start is None or after >= start):
            sql += " AND key>?"
            params.append(after)
        elif start is not None:
            sql += " AND key>=?"
            params.append(start)
        if end is not None:
            sql += " AND key<?"
            params.append(end)
        return sql, params

    def ids(self) -> list[int]:
        """Every stored snapshot's id."""
        return [row[0] for row in self.core.query("SELECT sid FROM snapshots")]

    def info(self, snapshot_id: int) -> SnapshotInfo | None:
        rows = self.core.query("SELECT sid, stream_seq, ts_us FROM snapshots WHERE sid=?", (snapshot_id,))
        return SnapshotInfo(*rows[0]) if rows else None

    def read(self, snapshot_id: int, start_key: bytes | None, end_key: bytes | None,
             after_key: bytes | None, limit: int) -> tuple[list[bytes], list[bytes]]:
        """The keys and row bodies of up to ``limit`` rows in key order, in range and after ``after_key``.

        A body is a PUT_ROW PlainBuffer row without the message header (no extension) with every visible
        version of every column: the row's stored encoding when nothing is hidden from it (the common case,
        decided in SQL so such rows cost no Python call), else encoded here.
        """
        info = self._schema(snapshot_id)
        sql, params = self._snap_where(snapshot_id, start_key, end_key, after_key)
        now_ms = self.core.clock.now_ms()
        ttl, max_versions = info.time_to_live, info.max_versions
        usable = usable_params(ttl, max_versions, now_ms)
        rows = self.core.query(
            f"SELECT key, CASE WHEN {USABLE_SQL} THEN rec END, CASE WHEN {USABLE_SQL} THEN NULL ELSE data END "
            f"FROM snap_rows WHERE {sql} ORDER BY key LIMIT ?", [*usable, *usable, *params, limit])
        if not rows:
            return [], []
        keys, bodies, datas = map(list, zip(*rows, strict=True))
        if None in bodies:
            names, types = info.pk_names, info.pk_types
            for i, body in enumerate(bodies):
                if body is None:
                    cols = visible_columns(load_columns(datas[i]), ttl, max_versions, now_ms)
                    pk = list(zip(names, decode_key(keys[i], types), strict=True))
                    bodies[i] = encode_row_body(pk, [(n, v, None, ts) for n in sorted(cols) for ts, v in cols[n]])
        return keys, bodies

    def run(self, snapshot_id: int, frame: Frame) -> EncodedRun | None:
        """The snapshot's rows from memory (:mod:`.read_cache`), when every row's stored encoding is what a
        read returns now; else None (read them with :meth:`read`)."""
        info = self._schema(snapshot_id)
        run = self.cache.snapshot(snapshot_id, frame)
        if run is None or not run.usable(info.time_to_live, info.max_versions, self.core.clock.now_ms()):
            return None
        return run

    def drop(self, snapshot_id: int) -> None:
        """Delete the snapshot, its rows a chunk per transaction (writers wait for one chunk at most)."""
        self._schemas.pop(snapshot_id, None)
        self.cache.forget_snapshot(snapshot_id)
        while True:
            with self.core.write() as txn:
                gone = txn.conn.execute(
                    "DELETE FROM snap_rows WHERE sid=? AND key IN (SELECT key FROM snap_rows WHERE sid=? LIMIT ?)",
                    (snapshot_id, snapshot_id, _DROP_CHUNK)).rowcount
            if gone < _DROP_CHUNK:
                break
        with self.core.write() as txn:
            txn.execute("DELETE FROM snapshots WHERE sid=?", (snapshot_id,))
