"""The emulator's database: :class:`Store` composes the store components into one thread-safe object.

SQLite storage of tables, rows, the stream log, stream partitions and snapshots, one job per module:

* :mod:`.store_core` – schema, connections, the write lock and write transactions (:class:`WriteTxn`);
* :mod:`.store_tables` – the table catalogue (create, describe, update, delete);
* :mod:`.store_stream` – the stream log: appending, partitions (split/merge), retention, reading;
* :mod:`.store_snapshots` – frozen copies of a table for the tunnel service's base data;
* :mod:`.store_model` – the shared value types and the stored-cell format.

The components are mixins over the one :class:`~.store_core.StoreCore` (one lock, one writer connection),
so a write and its stream record commit in the same transaction. Rows are keyed by :mod:`.keys` (memcmp
order = Tablestore PK order). Callers import everything from here.
"""

from __future__ import annotations

from typing import Any

from airflow_tablestore.emulator.store_core import WriteTxn
from airflow_tablestore.emulator.store_model import (
    ACTION_DELETE,
    ACTION_PUT,
    ACTION_UPDATE,
    HASH_SPACE,
    Columns,
    PartitionInfo,
    SnapshotInfo,
    StreamEntry,
    TableInfo,
    dump_columns,
    load_columns,
    partition_hash,
    visible_columns,
)
from airflow_tablestore.emulator.store_snapshots import SnapshotStore
from airflow_tablestore.emulator.store_stream import StreamLog
from airflow_tablestore.emulator.store_tables import TableCatalog


class Store(TableCatalog, StreamLog, SnapshotStore):
    """The emulator's database. Thread-safe; one writer at a time, concurrent readers."""

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


__all__ = [
    "ACTION_DELETE",
    "ACTION_PUT",
    "ACTION_UPDATE",
    "HASH_SPACE",
    "Columns",
    "PartitionInfo",
    "SnapshotInfo",
    "Store",
    "StreamEntry",
    "TableInfo",
    "WriteTxn",
    "dump_columns",
    "load_columns",
    "partition_hash",
    "visible_columns",
]
