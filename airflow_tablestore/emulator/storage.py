"""SQLite storage of the emulator: tables, rows, the stream log, stream partitions and snapshots.

One database file (WAL mode). Writes are serialised by one ``threading.RLock`` and run in one transaction
per request (:meth:`Store.write`); reads use a small pool of reader connections and see committed data.
Rows are keyed by :mod:`keys` (memcmp order = Tablestore PK order) and their cells are stored compactly as a
``marshal``-ed ``{column: [(ts_ms, value), ...newest first]}`` (all versions; visibility is decided at read
time from the table options).

The tunnel service builds on the stream log and the snapshots; see the methods' docstrings for the contract.

Size (~690 lines): one ``Store`` class behind one lock and one SQLite connection; rows, the stream log and
snapshots must change in the same transaction (a write and its stream record commit together). The split into
row, stream-log and snapshot modules over a shared transaction object is planned in issue 13 (structure),
which is ordered after the behaviour issues so the code moves once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import os
import queue
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from airflow_tablestore.emulator import codec
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.errors import EmulatorError
from airflow_tablestore.emulator.keys import decode_key

log = logging.getLogger(__name__)

Columns = dict[str, list[tuple[int, Any]]]
"""Stored cells of one row: column name → versions ``(ts_ms, value)`` newest first."""

ACTION_PUT = 1
ACTION_UPDATE = 2
ACTION_DELETE = 3
HASH_SPACE = 1 << 32

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tables(name TEXT PRIMARY KEY, tid INTEGER NOT NULL, meta TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(tid INTEGER NOT NULL, key BLOB NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY(tid, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_log(seq INTEGER PRIMARY KEY, stream_id TEXT NOT NULL,
    partition_id TEXT NOT NULL, ts_us INTEGER NOT NULL, row_index INTEGER NOT NULL, action INTEGER NOT NULL,
    record BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS stream_log_part ON stream_log(partition_id, seq);
CREATE INDEX IF NOT EXISTS stream_log_ts ON stream_log(stream_id, ts_us);
CREATE TABLE IF NOT EXISTS stream_partitions(partition_id TEXT PRIMARY KEY, stream_id TEXT NOT NULL,
    table_name TEXT NOT NULL, hash_lo INTEGER NOT NULL, hash_hi INTEGER NOT NULL, parents TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0, created_seq INTEGER NOT NULL, closed_seq INTEGER,
    trimmed_seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS snapshots(sid INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL,
    tid INTEGER NOT NULL, stream_seq INTEGER NOT NULL, ts_us INTEGER NOT NULL, schema TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snap_rows(sid INTEGER NOT NULL, key BLOB NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY(sid, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoinc(tid INTEGER PRIMARY KEY, last INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class TableInfo:
    """A table's schema, options and stream settings (read-only view of the stored metadata)."""

    name: str
    table_id: int
    pk: tuple[tuple[str, str], ...]  # (name, "INTEGER"|"STRING"|"BINARY") in schema order
    auto_increment: str | None
    defined_columns: tuple[tuple[str, str], ...]
    time_to_live: int
    max_versions: int
    deviation_s: int
    allow_update: bool
    reserved_read: int
    reserved_write: int
    created_s: float
    last_increase_s: int
    last_decrease_s: int | None
    stream_enabled: bool
    stream_id: str | None
    stream_expiration_hours: float
    stream_enabled_us: int
    raw: dict[str, Any] = field(repr=False, compare=False, hash=False)

    @property
    def pk_names(self) -> list[str]:
        return [n for n, _ in self.pk]

    @property
    def pk_types(self) -> list[str]:
        return [t for _, t in self.pk]

    @staticmethod
    def from_meta(meta: dict[str, Any]) -> TableInfo:
        o = meta["options"]
        s = meta.get("stream") or {}
        auto = [p[0] for p in meta["pk"] if len(p) > 2 and p[2]]
        return TableInfo(
            name=meta["name"],
            table_id=meta["tid"],
            pk=tuple((p[0], p[1]) for p in meta["pk"]),
            auto_increment=auto[0] if auto else None,
            defined_columns=tuple((d[0], d[1]) for d in meta.get("defined", [])),
            time_to_live=o["ttl"],
            max_versions=o["max_versions"],
            deviation_s=o["deviation"],
            allow_update=o["allow_update"],
            reserved_read=meta["reserved"][0],
            reserved_write=meta["reserved"][1],
            created_s=meta["created_s"],
            last_increase_s=meta["last_increase"],
            last_decrease_s=meta.get("last_decrease"),
            stream_enabled=bool(s.get("enabled")),
            stream_id=s.get("stream_id"),
            stream_expiration_hours=float(s.get("expiration", 0) or 0),
            stream_enabled_us=int(s.get("enabled_us", 0) or 0),
            raw=meta,
        )


class PartitionInfo(NamedTuple):
    """A stream partition. ``closed`` partitions (split) get no new records; children list it as parent."""

    partition_id: str
    parent_ids: tuple[str, ...]
    closed: bool
    created_seq: int
    closed_seq: int | None = None
    hash_lo: int = 0
    hash_hi: int = HASH_SPACE


class StreamEntry(NamedTuple):
    """One stream-log record; ``record`` is the finished PlainBuffer (header + row + sequence extension)."""

    seq: int
    timestamp_us: int
    action: int
    record: bytes


class SnapshotInfo(NamedTuple):
    """A frozen copy of a table; stream records with ``seq > stream_seq`` are exactly the later changes."""

    snapshot_id: int
    stream_seq: int
    timestamp_us: int


def dump_columns(cols: Columns) -> bytes:
    return marshal.dumps(cols)


def load_columns(data: bytes) -> Columns:
    return marshal.loads(data)  # type: ignore[no-any-return]


def visible_columns(cols: Columns, ttl: int, max_versions: int, now_ms: int) -> Columns:
    """The versions a reader may see: not expired by TTL, at most ``max_versions`` newest per column."""
    out: Columns = {}
    min_ts = (now_ms // 1000 - ttl) * 1000 if ttl > 0 else None
    for name, versions in cols.items():
        vs = versions if min_ts is None else [v for v in versions if v[0] >= min_ts]
        if vs:
            out[name] = vs[:max_versions]
    return out


def partition_hash(first_pk_value: Any) -> int:
    """Stable 32-bit hash of the first PK column value (selects the stream partition)."""
    return zlib.crc32(codec.value_payload(first_pk_value))


class WriteTxn:
    """Handle for one write transaction (holds the write lock); see :meth:`Store.write`."""

    def __init__(self, store: Store, conn: sqlite3.Connection) -> None:
        self.store = store
        self.conn = conn
        self.logged = False
        self.meta_changed = False  # table/partition caches touched: reload them on rollback

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run any SQL inside this transaction (for the tunnel service's own tables)."""
        return self.conn.execute(sql, params).fetchall()

    def get(self, tid: int, key: bytes) -> Columns | None:
        rows = self.conn.execute("SELECT data FROM rows WHERE tid=? AND key=?", (tid, key)).fetchall()
        return load_columns(rows[0][0]) if rows else None

    def put(self, tid: int, key: bytes, cols: Columns) -> None:
        self.conn.execute("INSERT OR REPLACE INTO rows(tid, key, data) VALUES(?,?,?)", (tid, key, dump_columns(cols)))

    def delete(self, tid: int, key: bytes) -> None:
        self.conn.execute("DELETE FROM rows WHERE tid=? AND key=?", (tid, key))

    def next_auto_increment(self, tid: int) -> int:
        rows = self.conn.execute("SELECT last FROM autoinc WHERE tid=?", (tid,)).fetchall()
        row = rows[0] if rows else None
        value = max((row[0] + 1) if row else 1, self.store.clock.now_us())
        self.conn.execute("INSERT OR REPLACE INTO autoinc(tid, last) VALUES(?,?)", (tid, value))
        return value

    def log(
        self,
        info: TableInfo,
        action: int,
        pk: Sequence[tuple[str, Any]],
        cells: Sequence[tuple[str, Any, int | None, int | None]],
    ) -> int | None:
        """Append one stream record for a row write (no-op when the table has no stream); returns its seq.

        ``cells`` = ``(name, value, op, ts)`` as they go into the PlainBuffer record.
        """
        if not info.stream_enabled or not info.stream_id:
            return None
        store = self.store
        pid = store._partition_for(info.stream_id, partition_hash(pk[0][1]))
        ts_us = store.clock.now_us()
        store._head_seq += 1
        seq = store._head_seq
        record = codec.encode_row(
            list(pk), list(cells), delete_marker=action == ACTION_DELETE, seq=(0, ts_us, 0)
        )
        self.conn.execute(
            "INSERT INTO stream_log(seq, stream_id, partition_id, ts_us, row_index, action, record) "
            "VALUES(?,?,?,?,?,?,?)",
            (seq, info.stream_id, pid, ts_us, 0, action, record),
        )
        self.logged = True
        return seq


class Store:
    """The emulator's database. Thread-safe; one writer at a time, concurrent readers."""

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None, *,
                 stream_partitions: int = 4, default_retention_hours: int = 168) -> None:
        self.path = os.fspath(path)
        self.clock = clock or Clock()
        self.stream_partitions_count = stream_partitions
        self.default_retention_hours = default_retention_hours
        self._lock = threading.RLock()
        self._txn_owner: int | None = None
        self._txn: WriteTxn | None = None
        self._writer = self._connect()
        self._writer.executescript(_SCHEMA)
        columns = {r[1] for r in self._writer.execute("PRAGMA table_info(stream_partitions)")}
        if "trimmed_seq" not in columns:
            self._writer.execute("ALTER TABLE stream_partitions ADD COLUMN trimmed_seq INTEGER NOT NULL DEFAULT 0")
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._tables: dict[str, TableInfo] = {}
        self._partitions: dict[str, list[tuple[int, int, str]]] = {}
        self._last_trim: dict[str, float] = {}
        self._closed = False
        row = self._writer.execute("SELECT v FROM meta WHERE k='head_seq'").fetchone()
        max_seq = self._writer.execute("SELECT COALESCE(MAX(seq), 0) FROM stream_log").fetchone()[0]
        self._head_seq = max(int(row[0]) if row else 0, int(max_seq))
        self._load_tables()

    # -- connections ----------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA cache_size=-65536")
        return conn

    @contextlib.contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A pooled read-only connection (sees committed data). Inside a write txn, the writer itself."""
        if self._txn_owner == threading.get_ident() and self._txn is not None:
            yield self._txn.conn
            return
        try:
            conn = self._readers.get_nowait()
        except queue.Empty:
            conn = self._connect()
            with self._readers_lock:
                self._all_readers.append(conn)
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._readers.put(conn)

    @contextlib.contextmanager
    def write(self) -> Iterator[WriteTxn]:
        """Serialised write transaction: committed on normal exit, rolled back on exception. Re-entrant."""
        with self._lock:
            if self._txn is not None:  # nested: join the outer transaction
                yield self._txn
                return
            if self._closed:
                raise RuntimeError("store is closed")
            head_before = self._head_seq
            txn = WriteTxn(self, self._writer)
            self._writer.execute("BEGIN IMMEDIATE")
            self._txn, self._txn_owner = txn, threading.get_ident()
            try:
                yield txn
                if self._head_seq != head_before:
                    self._writer.execute(
                        "INSERT OR REPLACE INTO meta(k, v) VALUES('head_seq', ?)", (str(self._head_seq),)
                    )
                self._writer.execute("COMMIT")
            except BaseException as exc:
                self._writer.execute("ROLLBACK")
                self._head_seq = head_before
                if txn.meta_changed or not isinstance(exc, EmulatorError):
                    self._load_tables()
                raise
            finally:
                self._txn, self._txn_owner = None, None

    transaction = write

    def committed_now_us(self) -> int:
        """The current time, read while no write is in flight: every change stamped earlier is committed
        (writes take their stream timestamp and commit under the same lock)."""
        with self._lock:
            return self.clock.now_us()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one SQL statement in its own write transaction (or the current one); returns all rows."""
        with self.write() as txn:
            return txn.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read-only SQL statement on a reader connection; returns all rows."""
        with self.reader() as conn:
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Wait for the running write, then close every connection (checkpointing the WAL)."""
        with self._lock:
            self._closed = True
            with self._readers_lock:
                for conn in self._all_readers:
                    with contextlib.suppress(Exception):
                        conn.close()
                self._all_readers.clear()
            with contextlib.suppress(Exception):
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer.close()

    # -- tables ---------------------------------------------------------------------------------------
    def _load_tables(self) -> None:
        tables = {}
        for name, meta in self._writer.execute("SELECT name, meta FROM tables"):
            tables[name] = TableInfo.from_meta(json.loads(meta))
        self._tables = tables
        parts: dict[str, list[tuple[int, int, str]]] = {}
        for pid, sid, lo, hi in self._writer.execute(
            "SELECT partition_id, stream_id, hash_lo, hash_hi FROM stream_partitions WHERE closed=0"
        ):
            parts.setdefault(sid, []).append((lo, hi, pid))
        self._partitions = parts

    def get_table_info(self, table: str) -> TableInfo | None:
        """Schema, options and stream settings of ``table``, or None if it does not exist."""
        return self._tables.get(table)

    def list_tables(self) -> list[str]:
        return sorted(self._tables)

    def create_table(self, meta: dict[str, Any]) -> TableInfo:
        """Store a new table (``meta`` as built by the table API; ``tid`` is assigned here)."""
        with self.write() as txn:
            txn.meta_changed = True
            if meta["name"] in self._tables:
                raise KeyError(meta["name"])
            last = txn.execute("SELECT v FROM meta WHERE k='next_tid'")
            tid = int(last[0][0]) + 1 if last else 1
            txn.execute("INSERT OR REPLACE INTO meta(k, v) VALUES('next_tid', ?)", (str(tid),))
            meta = dict(meta, tid=tid)
            if (meta.get("stream") or {}).get("enabled"):
                self._new_stream(txn, meta)
            txn.execute("INSERT INTO tables(name, tid, meta) VALUES(?,?,?)", (meta["name"], tid, json.dumps(meta)))
            info = TableInfo.from_meta(meta)
            self._tables[info.name] = info
            return info

    def update_table_meta(self, table: str, meta: dict[str, Any]) -> TableInfo:
        """Replace a table's metadata. Enabling the stream creates a new stream id; disabling drops its log."""
        with self.write() as txn:
            txn.meta_changed = True
            old = self._tables[table]
            old_stream = old.raw.get("stream") or {}
            new_stream = meta.get("stream") or {}
            if new_stream.get("enabled") and not old_stream.get("enabled"):
                self._new_stream(txn, meta)
            elif old_stream.get("enabled") and not new_stream.get("enabled"):
                self._drop_stream(txn, old_stream.get("stream_id"))
            txn.execute("UPDATE tables SET meta=? WHERE name=?", (json.dumps(meta), table))
            info = TableInfo.from_meta(meta)
            self._tables[table] = info
            return info

    def delete_table(self, table: str) -> None:
        """Drop the table, its rows and its stream log (snapshots stay until dropped)."""
        with self.write() as txn:
            txn.meta_changed = True
            info = self._tables[table]
            txn.execute("DELETE FROM rows WHERE tid=?", (info.table_id,))
            txn.execute("DELETE FROM tables WHERE name=?", (table,))
            txn.execute("DELETE FROM autoinc WHERE tid=?", (info.table_id,))
            if info.stream_id:
                self._drop_stream(txn, info.stream_id)
            del self._tables[table]

    # -- stream partitions ------------------------------------------------------------------------------
    def _new_stream(self, txn: WriteTxn, meta: dict[str, Any]) -> None:
        stream = dict(meta.get("stream") or {})
        sid = f"{meta['name']}_{uuid.uuid4().hex[:12]}"
        stream.update(stream_id=sid, enabled=True, enabled_us=self.clock.now_us())
        stream.setdefault("expiration", self.default_retention_hours)
        meta["stream"] = stream
        n = self.stream_partitions_count
        bounds = [i * HASH_SPACE // n for i in range(n + 1)]
        for i in range(n):
            self._add_partition(txn, sid, meta["name"], f"{sid}-{i}", bounds[i], bounds[i + 1], ())

    def _add_partition(self, txn: WriteTxn, sid: str, table: str, pid: str, lo: int, hi: int,
                       parents: tuple[str, ...]) -> None:
        txn.meta_changed = True
        txn.execute(
            "INSERT INTO stream_partitions(partition_id, stream_id, table_name, hash_lo, hash_hi, parents, "
            "closed, created_seq) VALUES(?,?,?,?,?,?,0,?)",
            (pid, sid, table, lo, hi, json.dumps(list(parents)), self._head_seq),
        )
        self._partitions.setdefault(sid, []).append((lo, hi, pid))

    def _drop_stream(self, txn: WriteTxn, sid: str | None) -> None:
        txn.meta_changed = True
        if not sid:
            return
        txn.execute("DELETE FROM stream_log WHERE stream_id=?", (sid,))
        txn.execute("DELETE FROM stream_partitions WHERE stream_id=?", (sid,))
        self._partitions.pop(sid, None)

    def _partition_for(self, sid: str, h: int) -> str:
        for lo, hi, pid in self._partitions.get(sid, ()):
            if lo <= h < hi:
                return pid
        raise RuntimeError(f"no open stream partition covers hash {h} of stream {sid}")

    def stream_partitions(self, table: str) -> list[PartitionInfo]:
        """All partitions (open and closed) of the table's current stream, in creation order."""
        info = self._tables.get(table)
        if info is None or not info.stream_id:
            return []
        rows = self.query(
            "SELECT partition_id, parents, closed, created_seq, closed_seq, hash_lo, hash_hi "
            "FROM stream_partitions WHERE stream_id=? ORDER BY rowid",
            (info.stream_id,),
        )
        return [PartitionInfo(r[0], tuple(json.loads(r[1])), bool(r[2]), r[3], r[4], r[5], r[6]) for r in rows]

    def split_partition(self, table: str, partition_id: str | None = None) -> list[PartitionInfo]:
        """Close an open partition (default: the first) and create two children splitting its hash range.

        New writes for the hash range go to the children; the parent's records stay readable.
        """
        with self.write() as txn:
            info = self._tables.get(table)
            if info is None or not info.stream_id:
                raise KeyError(table)
            sid = info.stream_id
            opened = self._partitions.get(sid, [])
            choice = [p for p in opened if partition_id is None or p[2] == partition_id]
            if not choice:
                raise KeyError(partition_id or table)
            lo, hi, pid = choice[0]
            txn.execute("UPDATE stream_partitions SET closed=1, closed_seq=? WHERE partition_id=?",
                        (self._head_seq, pid))
            self._partitions[sid] = [p for p in opened if p[2] != pid]
            mid = (lo + hi) // 2
            n = txn.execute("SELECT COUNT(*) FROM stream_partitions WHERE stream_id=?", (sid,))[0][0]
            a, b = f"{sid}-{n}", f"{sid}-{n + 1}"
            self._add_partition(txn, sid, table, a, lo, mid, (pid,))
            self._add_partition(txn, sid, table, b, mid, hi, (pid,))
        return [p for p in self.stream_partitions(table) if p.partition_id in (a, b)]

    def merge_partitions(self, table: str, first_id: str | None = None,
                         second_id: str | None = None) -> PartitionInfo:
        """Close two open partitions with adjacent hash ranges (default: the first adjacent pair) and create one
        child covering both, with ``parent_ids = (first, second)`` (first = lower hash range)."""
        with self.write() as txn:
            info = self._tables.get(table)
            if info is None or not info.stream_id:
                raise KeyError(table)
            sid = info.stream_id
            opened = sorted(self._partitions.get(sid, []))
            pairs = [(x, y) for x, y in zip(opened, opened[1:], strict=False) if x[1] == y[0]]
            if first_id is not None or second_id is not None:
                wanted = {first_id, second_id} - {None}
                pairs = [(x, y) for x, y in pairs if wanted <= {x[2], y[2]}]
            if not pairs:
                raise KeyError(f"no adjacent open partitions to merge: {first_id}, {second_id}")
            low, high = pairs[0]
            for part in (low, high):
                txn.execute("UPDATE stream_partitions SET closed=1, closed_seq=? WHERE partition_id=?",
                            (self._head_seq, part[2]))
            self._partitions[sid] = [p for p in self._partitions.get(sid, []) if p[2] not in (low[2], high[2])]
            n = txn.execute("SELECT COUNT(*) FROM stream_partitions WHERE stream_id=?", (sid,))[0][0]
            child = f"{sid}-{n}"
            self._add_partition(txn, sid, table, child, low[0], high[1], (low[2], high[2]))
        return next(p for p in self.stream_partitions(table) if p.partition_id == child)

    def set_stream_retention(self, table: str, hours: float) -> None:
        """Override the retention (expiration hours) of the table's stream."""
        with self.write():
            info = self._tables[table]
            meta = json.loads(json.dumps(info.raw))
            meta.setdefault("stream", {})["expiration"] = hours
            self.update_table_meta(table, meta)
        self._last_trim.pop(info.stream_id or "", None)

    # -- stream log -------------------------------------------------------------------------------------
    def latest_stamp_us(self) -> int:
        """The time stamp of the newest stream record still stored (0 if none): the clock must not go below it."""
        rows = self.query("SELECT ts_us FROM stream_log ORDER BY seq DESC LIMIT 1")
        return int(rows[0][0]) if rows else 0

    def stream_head_seq(self) -> int:
        """The seq of the newest record ever appended (0 if none); seqs are global and never reused."""
        return self._head_seq

    def retention_start_us(self, table: str) -> int | None:
        """Records older than this (µs) are trimmed; None when the table has no stream."""
        info = self._tables.get(table)
        if info is None or not info.stream_enabled:
            return None
        return self.clock.now_us() - int(info.raw["stream"]["expiration"] * 3600 * 1_000_000)

    def trim_stream(self, table: str, force: bool = False) -> int:
        """Delete records older than the stream's retention (lazily, at most once a second unless forced)."""
        info = self._tables.get(table)
        if info is None or not info.stream_id:
            return 0
        now = time.monotonic()
        if not force and now - self._last_trim.get(info.stream_id, 0.0) < 1.0:
            return 0
        self._last_trim[info.stream_id] = now
        horizon = self.retention_start_us(table)
        with self.write() as txn:
            for pid, max_seq in txn.execute(
                "SELECT partition_id, MAX(seq) FROM stream_log WHERE stream_id=? AND ts_us<? GROUP BY partition_id",
                (info.stream_id, horizon),
            ):
                txn.execute("UPDATE stream_partitions SET trimmed_seq=MAX(trimmed_seq, ?) WHERE partition_id=?",
                            (max_seq, pid))
            cur = txn.conn.execute("DELETE FROM stream_log WHERE stream_id=? AND ts_us<?", (info.stream_id, horizon))
            if cur.rowcount:
                log.info("trimmed %d expired stream records of table %s", cur.rowcount, table)
            return cur.rowcount

    def trimmed_seq(self, table: str, partition_id: str) -> int:
        """Highest seq of the partition removed by retention (0 if none): positions below it are gone."""
        self.trim_stream(table)
        rows = self.query("SELECT trimmed_seq FROM stream_partitions WHERE partition_id=?", (partition_id,))
        return int(rows[0][0]) if rows else 0

    def read_stream(self, table: str, partition_id: str, after_seq: int, limit: int) -> list[StreamEntry]:
        """Up to ``limit`` retained records of one partition with ``seq > after_seq``, in seq order."""
        self.trim_stream(table)
        rows = self.query(
            "SELECT seq, ts_us, action, record FROM stream_log WHERE partition_id=? AND seq>? ORDER BY seq LIMIT ?",
            (partition_id, after_seq, limit),
        )
        return [StreamEntry(r[0], r[1], r[2], r[3]) for r in rows]

    def oldest_retained_us(self, table: str, partition_id: str) -> int | None:
        """Timestamp (µs) of the oldest retained record of the partition, None when it holds none."""
        self.trim_stream(table)
        rows = self.query("SELECT ts_us FROM stream_log WHERE partition_id=? ORDER BY seq LIMIT 1", (partition_id,))
        return rows[0][0] if rows else None

    def oldest_retained_seq(self, table: str, partition_id: str) -> int | None:
        """Seq of the oldest retained record of the partition, None when it holds none."""
        self.trim_stream(table)
        rows = self.query("SELECT seq FROM stream_log WHERE partition_id=? ORDER BY seq LIMIT 1", (partition_id,))
        return rows[0][0] if rows else None

    # -- snapshots --------------------------------------------------------------------------------------
    def create_snapshot(self, table: str) -> SnapshotInfo:
        """Copy the table's rows atomically w.r.t. writes; replay = snapshot + records with seq > stream_seq."""
        with self.write() as txn:
            info = self._tables.get(table)
            if info is None:
                raise KeyError(table)
            ts_us = self.clock.now_us()
            txn.conn.execute(
                "INSERT INTO snapshots(table_name, tid, stream_seq, ts_us, schema) VALUES(?,?,?,?,?)",
                (table, info.table_id, self._head_seq, ts_us, json.dumps(info.raw)),
            )
            sid = txn.execute("SELECT last_insert_rowid()")[0][0]
            txn.conn.execute("INSERT INTO snap_rows(sid, key, data) SELECT ?, key, data FROM rows WHERE tid=?",
                             (sid, info.table_id))
            log.info("snapshot %s of table %s taken at stream seq %s", sid, table, self._head_seq)
            return SnapshotInfo(sid, self._head_seq, ts_us)

    def snapshot_ranges(self, snapshot_id: int, rows_per_range: int) -> list[tuple[bytes | None, bytes | None]]:
        """Key ranges ``[start, end)`` (None = unbounded) covering the snapshot, ~rows_per_range rows each."""
        keys = [r[0] for r in self.query(
            "SELECT key FROM (SELECT key, row_number() OVER (ORDER BY key) AS rn FROM snap_rows WHERE sid=?) "
            "WHERE rn > 1 AND (rn - 1) % ? = 0 ORDER BY key",
            (snapshot_id, max(1, rows_per_range)),
        )]
        bounds: list[bytes | None] = [None, *keys, None]
        return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]

    def snapshot_row_count(self, snapshot_id: int, start_key: bytes | None = None,
                           end_key: bytes | None = None) -> int:
        """Number of snapshot rows in ``[start_key, end_key)``."""
        sql, params = self._snap_where(snapshot_id, start_key, end_key, None)
        return int(self.query("SELECT COUNT(*) FROM snap_rows WHERE " + sql, params)[0][0])

    @staticmethod
    def _snap_where(sid: int, start: bytes | None, end: bytes | None,
                    after: bytes | None) -> tuple[str, list[Any]]:
        sql = "sid=?"
        params: list[Any] = [sid]
        if start is not None:
            sql += " AND key>=?"
            params.append(start)
        if end is not None:
            sql += " AND key<?"
            params.append(end)
        if after is not None:
            sql += " AND key>?"
            params.append(after)
        return sql, params

    def snapshot_info(self, snapshot_id: int) -> SnapshotInfo | None:
        rows = self.query("SELECT sid, stream_seq, ts_us FROM snapshots WHERE sid=?", (snapshot_id,))
        return SnapshotInfo(*rows[0]) if rows else None

    def read_snapshot(self, snapshot_id: int, start_key: bytes | None, end_key: bytes | None,
                      after_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` ``(key, record)`` in key order, in range and after ``after_key``.

        ``record`` is a PUT_ROW PlainBuffer (no extension) with every visible version of every column.
        """
        meta_rows = self.query("SELECT schema FROM snapshots WHERE sid=?", (snapshot_id,))
        if not meta_rows:
            raise KeyError(snapshot_id)
        info = TableInfo.from_meta(json.loads(meta_rows[0][0]))
        sql, params = self._snap_where(snapshot_id, start_key, end_key, after_key)
        rows = self.query(f"SELECT key, data FROM snap_rows WHERE {sql} ORDER BY key LIMIT ?", [*params, limit])
        now_ms = self.clock.now_ms()
        names, types = info.pk_names, info.pk_types
        out = []
        for key, data in rows:
            cols = visible_columns(load_columns(data), info.time_to_live, info.max_versions, now_ms)
            pk = list(zip(names, decode_key(key, types), strict=True))
            cells = [(n, v, None, ts) for n in sorted(cols) for ts, v in cols[n]]
            out.append((key, codec.encode_row(pk, cells)))
        return out

    def drop_snapshot(self, snapshot_id: int) -> None:
        with self.write() as txn:
            txn.execute("DELETE FROM snap_rows WHERE sid=?", (snapshot_id,))
            txn.execute("DELETE FROM snapshots WHERE sid=?", (snapshot_id,))

    # -- introspection ----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """A JSON-able summary (control API ``state``)."""
        tables = {}
        for name, info in sorted(self._tables.items()):
            count = self.query("SELECT COUNT(*) FROM rows WHERE tid=?", (info.table_id,))[0][0]
            tables[name] = {"rows": count, "stream_id": info.stream_id,
                            "stream_expiration_hours": info.raw.get("stream", {}).get("expiration")}
        return {"tables": tables, "stream_head_seq": self._head_seq,
                "stream_records": self.query("SELECT COUNT(*) FROM stream_log")[0][0],
                "snapshots": self.query("SELECT COUNT(*) FROM snapshots")[0][0]}
