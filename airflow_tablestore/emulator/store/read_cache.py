"""Encoded rows kept in memory for range reads: a table's, snapshot's or stream partition's as one blob.

A page served from SQLite costs a fetched tuple and a Python step per row; from a cached run it is two
bisects and one slice, so the emulator serves far more than a client can decode (issue 22: benchmarks must
measure the client, not the emulator). A run holds every row of one table or snapshot in key order (or every
record of a stream partition in seq order): the keys, their encodings back to back (``framed`` by the caller,
e.g. as ReadRecords entries) and the offsets.

When a run is built and kept:

* a snapshot never changes: its run is built at its first read and kept until it is dropped;
* a table or stream changes: :class:`~.core.StoreCore` counts the committed writes to each (its *version*).
  Reads from SQLite report the rows they took (:meth:`ReadCache.served`); once, at one version, they reach
  a quarter of the run's last size (at least 2 000 rows), the next read builds the run, whose cost is then
  about that of the reads it follows. A run of an older version is never used. Data written and read in turn,
  or read a few rows at a time between writes (the head of a stream), stays on SQLite.

Runs are kept only while every row has its stored encoding; the total is capped (``max_bytes``, oldest run
dropped first) and a table or snapshot larger than a quarter of it is never cached.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from itertools import accumulate
from typing import Any

from airflow_tablestore.emulator.store.core import StoreCore

_MAX_TRACKED = 10_000  # tables and partitions whose reads are counted (the oldest are forgotten)
_NONE_BYTES = 256  # what a "not cacheable" mark counts against the cap, so that they are dropped too

Frame = Callable[[Sequence[bytes], Sequence[int]], tuple[list[bytes], list[int]]]
"""Stored bodies and their actions (stream records; empty for rows) → the parts to join and each one's
framed size (e.g. a ReadRecords entry per row)."""


def unframed(bodies: Sequence[bytes], actions: Sequence[int]) -> tuple[list[bytes], list[int]]:
    """The bodies as they are (a GetRange page is the bodies back to back)."""
    return list(bodies), list(map(len, bodies))


class EncodedRun:
    """Every row of one table or snapshot, in key order, framed and back to back. Immutable."""

    __slots__ = ("keys", "blob", "offsets", "versions", "oldest_ms", "stamps", "nbytes")

    def __init__(self, keys: list[Any], parts: list[bytes], sizes: list[int], versions: int = 0,
                 oldest_ms: int | None = None, stamps: list[int] | None = None) -> None:
        self.keys = keys  # row keys (bytes), or stream records' seqs
        self.blob = b"".join(parts)
        self.offsets = list(accumulate(sizes, initial=0))
        self.versions = versions  # the most versions any column of any row has
        self.oldest_ms = oldest_ms  # the oldest version's timestamp, None without any cell
        self.stamps = stamps  # stream records' timestamps (µs)
        # for the cap: the blob, the keys (bytes or ints, each with its list slot), the offsets and stamps (ints)
        key_bytes = sum(map(len, keys)) + 41 * len(keys) if keys and isinstance(keys[0], bytes) else 36 * len(keys)
        self.nbytes = len(self.blob) + key_bytes + 36 * len(self.offsets) + 36 * len(stamps or ())

    def usable(self, ttl: int, max_versions: int, now_ms: int) -> bool:
        """Whether every row's stored encoding is what a read with these options returns (as USABLE_SQL)."""
        if self.versions > max_versions:
            return False
        return ttl <= 0 or self.oldest_ms is None or self.oldest_ms >= (now_ms // 1000 - ttl) * 1000

    def bounds(self, start: Any, end: Any, after: Any = None) -> tuple[int, int]:
        """Row indexes ``[i, stop)`` of the keys in ``[start, end)`` and after ``after``."""
        keys = self.keys
        i = 0 if start is None else bisect_left(keys, start)
        if after is not None:
            i = max(i, bisect_right(keys, after))
        stop = len(keys) if end is None else bisect_left(keys, end)
        return i, max(i, stop)

    def taken(self, i: int, stop: int, limit: int, max_bytes: int) -> int | None:
        """How many rows from ``i`` a page takes (at most ``limit`` and ``stop - i``), or None when the page
        may end at the reads' ~4 MB cut instead: the rows before the last reach ``max_bytes`` framed (the cut
        less what the answer holds before the rows). The caller then reads from SQLite, whose per-row cut is
        the one answers are defined by: the same position must give the same answer from either path."""
        n = min(limit, stop - i)
        if n > 0 and self.offsets[i + n - 1] - self.offsets[i] >= max_bytes:
            return None
        return n

    def view(self, i: int, j: int) -> memoryview:
        """The framed rows ``[i, j)``, back to back (a view of the run's blob, not a copy)."""
        return memoryview(self.blob)[self.offsets[i]:self.offsets[j]]


class ReadCache:
    """The runs of the store's tables, stream partitions and snapshots (see the module docstring for when)."""

    def __init__(self, core: StoreCore, max_bytes: int = 512 * 1024 * 1024, min_rows: int = 2000) -> None:
        self.core = core
        self.max_bytes = max_bytes
        self.min_rows = min_rows  # rows SQLite serves at one version before a run may be built (two pages)
        self._runs: OrderedDict[Hashable, tuple[int, EncodedRun | None]] = OrderedDict()
        self._served: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # → (version, rows read from SQLite)
        self._sizes: dict[Hashable, int] = {}  # → rows in its last run: what a new run will cost to build
        self._building: set[Hashable] = set()  # runs being built now
        self._forgotten: set[int] = set()  # dropped snapshots (a read racing the drop must not keep a run)
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0  # runs handed out, cached or just built (tests check that reads which should use them do)

    def table(self, table_id: int, frame: Frame = unframed) -> EncodedRun | None:
        """The table's run at its current version (built now once SQLite has served enough of it at this
        version, see :meth:`served`); None when the table is to be read from SQLite."""
        return self._changing(("rows", table_id), (table_id,), frame, "SELECT key, rec, nv, oldest FROM rows "
                              "WHERE tid=? ORDER BY key")

    def stream(self, stream_id: str, partition_id: str, frame: Frame) -> EncodedRun | None:
        """A stream partition's retained records (keys: seqs, with ``stamps``), as :meth:`table` (any append to
        the stream is a new version)."""
        return self._changing(("stream", stream_id), (partition_id,), frame, "SELECT seq, record, action, ts_us "
                              "FROM stream_log WHERE partition_id=? ORDER BY seq", stream=True)

    def served(self, version_key: tuple[str, Any], ident: Any, rows: int) -> None:
        """Count ``rows`` a read of ``ident`` (a table id, a partition id) took from SQLite at ``version_key``'s
        current version. A run is built once they reach a quarter of its last size (at least two pages), so a
        build costs about what the reads it saves cost, and data read a page at a time between writes (the head
        of a stream, a polled row) never pays for a build."""
        key = (*version_key, ident)
        version = self.core.version(version_key)
        with self._lock:
            seen, count = self._served.pop(key, (version, 0))
            self._served[key] = (version, (count if seen == version else 0) + rows)
            while len(self._served) > _MAX_TRACKED:
                self._served.popitem(last=False)

    def snapshot(self, snapshot_id: int, frame: Frame = unframed) -> EncodedRun | None:
        """The snapshot's run (built at its first read); None when too large or not every row is encoded."""
        key = ("snapshot", snapshot_id, frame)
        cached = self._get(key, 0)
        if cached is not None:
            return cached[1]
        if not self._claim(key):
            return None
        try:
            run = self._build("SELECT key, rec, nv, oldest FROM snap_rows WHERE sid=? ORDER BY key",
                              (snapshot_id,), frame, False)
            self._put(key, 0, run)
        finally:
            self._release(key)
        return run

    def clear(self, max_bytes: int | None = None) -> None:
        """Drop every run (and set a new cap: 0 keeps none, so every read goes to SQLite)."""
        with self._lock:
            if max_bytes is not None:
                self.max_bytes = max_bytes
            self._runs.clear()
            self._served.clear()
            self._sizes.clear()
            self._bytes = 0

    def forget_snapshot(self, snapshot_id: int) -> None:
        """Drop the runs of a dropped snapshot."""
        with self._lock:
            self._forgotten.add(snapshot_id)
            for key in [k for k in self._runs if k[0] == "snapshot" and k[1] == snapshot_id]:  # type: ignore[index]
                self._drop(key)

    # -- internals -------------------------------------------------------------------------------------
    def _changing(self, version_key: tuple[str, Any], params: tuple[Any, ...], frame: Frame, sql: str,
                  stream: bool = False) -> EncodedRun | None:
        version = self.core.version(version_key)  # before the scan: a run is never newer than its version
        key = (*version_key, *params, frame)
        cached = self._get(key, version)
        if cached is not None:
            return cached[1]
        tracked = (*version_key, *params)
        with self._lock:
            seen, rows = self._served.get(tracked, (None, 0))
            earned = seen == version and rows >= max(self.min_rows, self._sizes.get(tracked, 0) // 4)
        if not earned or not self._claim(key):
            return None
        try:
            run = self._build(sql, params, frame, stream)
            with self._lock:
                self._sizes[tracked] = len(run.keys) if run is not None else 0
                self._served.pop(tracked, None)
            self._put(key, version, run)
        finally:
            self._release(key)
        return run

    def _claim(self, key: Hashable) -> bool:
        """Whether this thread builds ``key``'s run: one build at a time per run (the tunnel's channels, read in
        parallel, all start on the same snapshot); the others read SQLite meanwhile."""
        with self._lock:
            if key in self._building:
                return False
            self._building.add(key)
            return True

    def _release(self, key: Hashable) -> None:
        with self._lock:
            self._building.discard(key)

    def _get(self, key: Hashable, version: int) -> tuple[int, EncodedRun | None] | None:
        with self._lock:
            cached = self._runs.get(key)
            if cached is None:
                return None
            if cached[0] != version:
                self._drop(key)
                return None
            self._runs.move_to_end(key)
            self.hits += cached[1] is not None
            return cached

    def _put(self, key: Hashable, version: int, run: EncodedRun | None) -> None:
        with self._lock:
            if key[0] == "snapshot" and key[1] in self._forgotten:  # type: ignore[index]
                return
            self.hits += run is not None
            if key in self._runs:
                self._drop(key)
            self._runs[key] = (version, run)  # None too: "not cacheable at this version" is worth knowing
            self._bytes += run.nbytes if run is not None else _NONE_BYTES
            while self._bytes > self.max_bytes and self._runs:
                self._drop(next(iter(self._runs)))

    def _drop(self, key: Hashable) -> None:
        _, run = self._runs.pop(key)
        self._bytes -= run.nbytes if run is not None else _NONE_BYTES

    def _build(self, sql: str, params: tuple[Any, ...], frame: Frame, stream: bool) -> EncodedRun | None:
        """Scan into a run; None as soon as a row has no stored encoding or the run outgrows its cap. Rows are
        ``(key, body, versions, oldest)``; stream records ``(seq, record, action, timestamp)``."""
        cap = self.max_bytes // 4
        if cap <= 0:
            return None
        keys: list[Any] = []
        parts: list[bytes] = []
        sizes: list[int] = []
        thirds: list[int] = []
        fourths: list[int | None] = []
        nbytes = 0
        with self.core.reader() as conn:
            cur = conn.execute(sql, params)
            try:
                while rows := cur.fetchmany(4096):
                    chunk_keys, bodies, third, fourth = zip(*rows, strict=True)
                    if None in bodies or (not stream and None in third):
                        return None
                    chunk_parts, chunk_sizes = frame(bodies, third if stream else ())
                    nbytes += sum(chunk_sizes) + (0 if stream else sum(map(len, chunk_keys))) + 150 * len(rows)
                    if nbytes > cap:
                        return None
                    keys += chunk_keys
                    parts += chunk_parts
                    sizes += chunk_sizes
                    thirds += third
                    fourths += fourth
            finally:
                cur.close()
        if stream:
            return EncodedRun(keys, parts, sizes, stamps=fourths)  # type: ignore[arg-type]
        stamps = [o for o in fourths if o is not None]
        return EncodedRun(keys, parts, sizes, max(thirds, default=0), min(stamps) if stamps else None)
