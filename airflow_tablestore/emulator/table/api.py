"""The Tablestore table API surface (``POST /<ApiName>``): one route table for DDL, row reads and row writes.

Each handler is named after its action, takes the raw request body and returns the response message or
raises :class:`EmulatorError`; semantics follow ``table-api-proto.md`` §3 and §5. The handlers live in one
module per job: :mod:`.ddl` (tables), :mod:`.reads` (GetRow, BatchGetRow, GetRange), :mod:`.writes` (PutRow,
UpdateRow, DeleteRow, BatchWriteRow); :mod:`.checks` and :mod:`.filters` hold the validation they share.
"""

from __future__ import annotations

from airflow_tablestore.emulator.api_common import Handler
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.table.ddl import DdlHandlers
from airflow_tablestore.emulator.table.reads import RowReads
from airflow_tablestore.emulator.table.writes import RowWrites


class TableApi:
    """The table API on top of a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.ddl = DdlHandlers(store, clock)
        self.reads = RowReads(store, clock, config)
        self.writes = RowWrites(store, clock)

    def routes(self) -> dict[str, Handler]:
        """The route table: wire path → handler."""
        ddl, reads, writes = self.ddl, self.reads, self.writes
        return {
            "/CreateTable": ddl.create_table,
            "/ListTable": ddl.list_table,
            "/DescribeTable": ddl.describe_table,
            "/UpdateTable": ddl.update_table,
            "/DeleteTable": ddl.delete_table,
            "/ComputeSplitPointsBySize": ddl.compute_split_points_by_size,
            "/GetRow": reads.get_row,
            "/PutRow": writes.put_row,
            "/UpdateRow": writes.update_row,
            "/DeleteRow": writes.delete_row,
            "/BatchGetRow": reads.batch_get_row,
            "/BatchWriteRow": writes.batch_write_row,
            "/GetRange": reads.get_range,
        }
