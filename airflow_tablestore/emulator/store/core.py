"""SQLite plumbing of the emulator store: schema, connections, the write lock, transactions, shared caches.

One database file (WAL mode). Writes are serialised by one ``threading.RLock`` and run in one transaction
per request (:meth:`StoreCore.write`); reads use a small pool of reader connections and see committed data.
:class:`StoreCore` is the one object the store's components (:mod:`.tables`, :mod:`.stream_log`,
:mod:`.snapshots`) share: connections, the lock, the stream head seq and the table and open-partition caches
(reloaded here after a rolled-back change). Rows, the stream log and snapshots change in the same
transaction: a write and its stream record commit together. A row is stored as its cells and, next to them,
their PlainBuffer encoding (:func:`.model.encode_stored`), which snapshots copy and reads serve as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sqlite3
import threading
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.errors import EmulatorError
from airflow_tablestore.emulator.store.keys import decode_key
from airflow_tablestore.emulator.store.model import Columns, TableInfo, dump_columns, encode_stored, load_columns

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tables(name TEXT PRIMARY KEY, tid INTEGER NOT NULL, meta TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(tid INTEGER NOT NULL, key BLOB NOT NULL, data BLOB NOT NULL,
    rec BLOB, nv INTEGER, oldest INTEGER, PRIMARY KEY(tid, key)) WITHOUT ROWID;
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
    rec BLOB, nv INTEGER, oldest INTEGER, PRIMARY KEY(sid, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoinc(tid INTEGER PRIMARY KEY, last INTEGER NOT NULL);
"""


class WriteTxn:
    """Handle for one write transaction (holds the write lock); see :meth:`StoreCore.write`."""

    def __init__(self, core: StoreCore, conn: sqlite3.Connection) -> None:
        self.core = core
        self.conn = conn
        self.meta_changed = False  # table/partition caches touched: reload them on rollback
        self.changed: set[Hashable] = set()  # what this transaction changes that read caches hold (version keys)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run any SQL inside this transaction (for the tunnel service's own tables). SQL that changes ``rows``
        or ``stream_log`` must add its version key to :attr:`changed` (see :meth:`StoreCore.version`), or the
        read cache keeps answering from the old rows."""
        return self.conn.execute(sql, params).fetchall()

    def get(self, tid: int, key: bytes) -> Columns | None:
        rows = self.conn.execute("SELECT data FROM rows WHERE tid=? AND key=?", (tid, key)).fetchall()
        return load_columns(rows[0][0]) if rows else None

    def put(self, tid: int, key: bytes, cols: Columns, pk: list[tuple[str, Any]] | None = None) -> None:
        """Store a row's cells and their encoding (``pk``: the row's primary key, else decoded from ``key``)."""
        if pk is None:
            info = next((i for i in self.core.table_cache.values() if i.table_id == tid), None)
            pk = None if info is None else list(zip(info.pk_names, decode_key(key, info.pk_types), strict=True))
        enc = encode_stored(pk, cols) if pk is not None else None
        self.changed.add(("rows", tid))
        self.conn.execute("INSERT OR REPLACE INTO rows(tid, key, data, rec, nv, oldest) VALUES(?,?,?,?,?,?)",
                          (tid, key, dump_columns(cols), *(enc or (None, None, None))))

    def delete(self, tid: int, key: bytes) -> None:
        self.changed.add(("rows", tid))
        self.conn.execute("DELETE FROM rows WHERE tid=? AND key=?", (tid, key))

    def next_auto_increment(self, tid: int) -> int:
        rows = self.conn.execute("SELECT last FROM autoinc WHERE tid=?", (tid,)).fetchall()
        row = rows[0] if rows else None
        value = max((row[0] + 1) if row else 1, self.core.clock.now_us())
        self.conn.execute("INSERT OR REPLACE INTO autoinc(tid, last) VALUES(?,?)", (tid, value))
        return value


class StoreCore:
    """Connections, the write lock and transactions, plus the state the store components share."""

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None) -> None:
        self.path = os.fspath(path)
        self.clock = clock or Clock()
        self._lock = threading.RLock()
        self._txn_owner: int | None = None
        self._txn: WriteTxn | None = None
        self._writer = self._connect()
        self._writer.executescript(_SCHEMA)
        columns = {r[1] for r in self._writer.execute("PRAGMA table_info(stream_partitions)")}
        if "trimmed_seq" not in columns:
            self._writer.execute(
                "ALTER TABLE stream_partitions ADD COLUMN trimmed_seq INTEGER NOT NULL DEFAULT 0")
        for table in ("rows", "snap_rows"):  # data dirs of older versions: their rows have no encoding (NULL)
            if "rec" not in {r[1] for r in self._writer.execute(f"PRAGMA table_info({table})")}:
                for column in ("rec BLOB", "nv INTEGER", "oldest INTEGER"):
                    self._writer.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.table_cache: dict[str, TableInfo] = {}
        """Every table by name (mirrors the ``tables`` table); changed by :mod:`.tables`."""
        self.partition_cache: dict[str, list[tuple[int, int, str]]] = {}
        """Open partitions ``(hash_lo, hash_hi, partition_id)`` by stream id; changed by
        :mod:`.stream_log`."""
        self._versions: dict[Hashable, int] = {}
        self._closed = False
        row = self._writer.execute("SELECT v FROM meta WHERE k='head_seq'").fetchone()
        max_seq = self._writer.execute("SELECT COALESCE(MAX(seq), 0) FROM stream_log").fetchone()[0]
        self.head_seq = max(int(row[0]) if row else 0, int(max_seq))
        """The seq of the newest stream record ever appended; committed with each write transaction."""
        self.load_caches()

    def load_caches(self) -> None:
        """(Re)load the table and open-partition caches from the writer connection."""
        self.table_cache = {name: TableInfo.from_meta(json.loads(meta))
                            for name, meta in self._writer.execute("SELECT name, meta FROM tables")}
        parts: dict[str, list[tuple[int, int, str]]] = {}
        for pid, sid, lo, hi in self._writer.execute(
            "SELECT partition_id, stream_id, hash_lo, hash_hi FROM stream_partitions WHERE closed=0"
        ):
            parts.setdefault(sid, []).append((lo, hi, pid))
        self.partition_cache = parts

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
            head_before = self.head_seq
            txn = WriteTxn(self, self._writer)
            self._writer.execute("BEGIN IMMEDIATE")
            self._txn, self._txn_owner = txn, threading.get_ident()
            try:
                yield txn
                if self.head_seq != head_before:
                    self._writer.execute(
                        "INSERT OR REPLACE INTO meta(k, v) VALUES('head_seq', ?)", (str(self.head_seq),)
                    )
                self._writer.execute("COMMIT")
                for key in txn.changed:  # after the commit: a reader that sees the new version sees the change
                    self._versions[key] = self._versions.get(key, 0) + 1
            except BaseException as exc:
                self._writer.execute("ROLLBACK")
                self.head_seq = head_before
                if txn.meta_changed or not isinstance(exc, EmulatorError):
                    self.load_caches()
                raise
            finally:
                self._txn, self._txn_owner = None, None

    def version(self, key: Hashable) -> int:
        """How many committed write transactions changed ``key`` since start-up: ``("rows", table_id)`` for a
        table's rows, ``("stream", stream_id)`` for a stream's log (read caches compare it)."""
        return self._versions.get(key, 0)

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
