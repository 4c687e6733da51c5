"""The emulator's database: :class:`Store` holds the store components over one shared :class:`StoreCore`.

``Store.db`` is the :class:`~.core.StoreCore` (one lock, one writer connection, the shared caches);
``Store.tables`` (:mod:`.tables`), ``Store.stream`` (:mod:`.stream_log`) and ``Store.snapshots``
(:mod:`.snapshots`) all work through it, so a write and its stream record commit in the same transaction.
``Store.read_cache`` (:mod:`.read_cache`) keeps tables and snapshots read again encoded in memory.
Rows are keyed by :mod:`.keys` (memcmp order = Tablestore PK order).
"""

from __future__ import annotations

import os
from typing import Any

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.store.core import StoreCore
from airflow_tablestore.emulator.store.read_cache import ReadCache
from airflow_tablestore.emulator.store.snapshots import SnapshotStore
from airflow_tablestore.emulator.store.stream_log import StreamLog
from airflow_tablestore.emulator.store.tables import TableCatalog


class Store:
    """The emulator's database. Thread-safe; one writer at a time, concurrent readers."""

    def __init__(self, path: str | os.PathLike[str], clock: Clock | None = None, *,
                 stream_partitions: int = 4, default_retention_hours: int = 168,
                 read_cache_bytes: int = 512 * 1024 * 1024) -> None:
        self.db = StoreCore(path, clock)
        self.clock = self.db.clock
        self.read_cache = ReadCache(self.db, read_cache_bytes)
        self.stream = StreamLog(self.db, self.read_cache, partitions=stream_partitions,
                                default_retention_hours=default_retention_hours)
        self.tables = TableCatalog(self.db, self.stream)
        self.snapshots = SnapshotStore(self.db, self.read_cache)

    def state(self) -> dict[str, Any]:
        """A JSON-able summary (control API ``state``)."""
        tables = {}
        for name, info in sorted(self.db.table_cache.items()):
            count = self.db.query("SELECT COUNT(*) FROM rows WHERE tid=?", (info.table_id,))[0][0]
            tables[name] = {"rows": count, "stream_id": info.stream_id,
                            "stream_expiration_hours": info.raw.get("stream", {}).get("expiration")}
        return {"tables": tables, "stream_head_seq": self.db.head_seq,
                "stream_records": self.db.query("SELECT COUNT(*) FROM stream_log")[0][0],
                "snapshots": self.db.query("SELECT COUNT(*) FROM snapshots")[0][0]}

    def close(self) -> None:
        """Wait for the running write, then close the database (see :meth:`StoreCore.close`)."""
        self.db.close()
