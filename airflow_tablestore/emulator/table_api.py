"""Routing of the Tablestore table API (``POST /<ApiName>``): DDL, row reads and row writes, by path.

Each handler takes the raw request body and returns the response message or raises :class:`EmulatorError`.
Semantics follow ``table-api-proto.md`` §3 and §5. The handlers live in one module per job:

* :mod:`.ddl` – CreateTable, ListTable, DescribeTable, UpdateTable, DeleteTable, ComputeSplitPointsBySize;
* :mod:`.table_reads` – GetRow, BatchGetRow, GetRange;
* :mod:`.table_writes` – PutRow, UpdateRow, DeleteRow, BatchWriteRow;
* :mod:`.table_checks` – the validation they share (primary keys, read specs, row writes).
"""

from __future__ import annotations

from airflow_tablestore.emulator.api_common import Handler, parse, set_consumed
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.ddl import DdlApi
from airflow_tablestore.emulator.storage import Store
from airflow_tablestore.emulator.table_checks import ReadSpec, WriteOp
from airflow_tablestore.emulator.table_reads import RowReads
from airflow_tablestore.emulator.table_writes import RowWrites


class TableApi:
    """The table API on top of a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config

    def handlers(self) -> dict[str, Handler]:
        """Every table API handler (DDL from :class:`DdlApi` plus the row operations), keyed by path."""
        reads = RowReads(self.store, self.clock, self.config)
        writes = RowWrites(self.store, self.clock)
        rows: dict[str, Handler] = {
            "/GetRow": reads.get_row,
            "/PutRow": writes.put_row,
            "/UpdateRow": writes.update_row,
            "/DeleteRow": writes.delete_row,
            "/BatchGetRow": reads.batch_get_row,
            "/BatchWriteRow": writes.batch_write_row,
            "/GetRange": reads.get_range,
        }
        return {**DdlApi(self.store, self.clock).handlers(), **rows}


__all__ = ["ReadSpec", "TableApi", "WriteOp", "parse", "set_consumed"]
