"""Table catalogue of the emulator store: create, describe, update and delete tables (their metadata and rows).

A mixin over :class:`~.store_core.StoreCore`: the table cache (``_tables``) mirrors the ``tables`` table and
is reloaded after a rolled-back metadata change. Enabling or disabling a table's stream is delegated to the
stream component (:mod:`.store_stream`) inside the same transaction.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_tablestore.emulator.store_core import StoreCore
from airflow_tablestore.emulator.store_model import TableInfo


class TableCatalog(StoreCore):
    """Tables: metadata (schema, options, stream settings) and the deletion of their rows."""

    def _load_tables(self) -> None:
        tables = {}
        for name, meta in self._writer.execute("SELECT name, meta FROM tables"):
            tables[name] = TableInfo.from_meta(json.loads(meta))
        self._tables = tables

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
