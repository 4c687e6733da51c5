"""Table catalogue of the emulator store: create, describe, update and delete tables (metadata and rows).

The table cache lives in the shared :class:`~.core.StoreCore` (the stream log and snapshots read it) and is
reloaded there after a rolled-back metadata change. Enabling or disabling a table's stream is done by the
catalogue's :class:`~.stream_log.StreamLog` inside the same transaction.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_tablestore.emulator.store.core import StoreCore
from airflow_tablestore.emulator.store.model import TableInfo
from airflow_tablestore.emulator.store.stream_log import StreamLog


class TableCatalog:
    """Tables: metadata (schema, options, stream settings) and the deletion of their rows."""

    def __init__(self, core: StoreCore, stream: StreamLog) -> None:
        self.core = core
        self.stream = stream

    def get(self, table: str) -> TableInfo | None:
        """Schema, options and stream settings of ``table``, or None if it does not exist."""
        return self.core.table_cache.get(table)

    def names(self) -> list[str]:
        """Every table's name, sorted."""
        return sorted(self.core.table_cache)

    def create(self, meta: dict[str, Any]) -> TableInfo:
        """Store a new table (``meta`` as built by the table API; ``tid`` is assigned here)."""
        with self.core.write() as txn:
            txn.meta_changed = True
            if meta["name"] in self.core.table_cache:
                raise KeyError(meta["name"])
            last = txn.execute("SELECT v FROM meta WHERE k='next_tid'")
            tid = int(last[0][0]) + 1 if last else 1
            txn.execute("INSERT OR REPLACE INTO meta(k, v) VALUES('next_tid', ?)", (str(tid),))
            meta = dict(meta, tid=tid)
            if (meta.get("stream") or {}).get("enabled"):
                self.stream.new_stream(txn, meta)
            txn.execute("INSERT INTO tables(name, tid, meta) VALUES(?,?,?)",
                        (meta["name"], tid, json.dumps(meta)))
            info = TableInfo.from_meta(meta)
            self.core.table_cache[info.name] = info
            return info

    def update_meta(self, table: str, meta: dict[str, Any]) -> TableInfo:
        """Replace a table's metadata. Enabling the stream creates a new stream id; disabling drops its
        log."""
        with self.core.write() as txn:
            txn.meta_changed = True
            old = self.core.table_cache[table]
            old_stream = old.raw.get("stream") or {}
            new_stream = meta.get("stream") or {}
            if new_stream.get("enabled") and not old_stream.get("enabled"):
                self.stream.new_stream(txn, meta)
            elif old_stream.get("enabled") and not new_stream.get("enabled"):
                self.stream.drop_stream(txn, old_stream.get("stream_id"))
            txn.execute("UPDATE tables SET meta=? WHERE name=?", (json.dumps(meta), table))
            info = TableInfo.from_meta(meta)
            self.core.table_cache[table] = info
            return info

    def delete(self, table: str) -> None:
        """Drop the table, its rows and its stream log (snapshots stay until dropped)."""
        with self.core.write() as txn:
            txn.meta_changed = True
            info = self.core.table_cache[table]
            txn.changed.add(("rows", info.table_id))
            txn.execute("DELETE FROM rows WHERE tid=?", (info.table_id,))
            txn.execute("DELETE FROM tables WHERE name=?", (table,))
            txn.execute("DELETE FROM autoinc WHERE tid=?", (info.table_id,))
            if info.stream_id:
                self.stream.drop_stream(txn, info.stream_id)
            del self.core.table_cache[table]

    def set_stream_retention(self, table: str, hours: float) -> None:
        """Override the retention (expiration hours) of the table's stream."""
        with self.core.write():
            info = self.core.table_cache[table]
            meta = json.loads(json.dumps(info.raw))
            meta.setdefault("stream", {})["expiration"] = hours
            self.update_meta(table, meta)
        self.stream.forget_trim(info.stream_id or "")
