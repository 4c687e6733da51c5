"""The slice of the emulator core's ``Store`` that the tunnel service uses (a structural type).

The real implementation is :class:`airflow_tablestore.emulator.storage.Store`; unit tests use a small fake.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class StoreAPI(Protocol):
    """Table info, stream log, snapshots and raw SQL on the shared SQLite database."""

    def get_table_info(self, table: str) -> Any | None: ...

    def stream_partitions(self, table: str) -> Sequence[Any]: ...

    def read_stream(self, table: str, partition_id: str, after_seq: int, limit: int) -> Sequence[Any]: ...

    def stream_head_seq(self) -> int: ...

    def retention_start_us(self, table: str) -> int | None: ...

    def oldest_retained_us(self, table: str, partition_id: str) -> int | None: ...

    def create_snapshot(self, table: str) -> Any: ...

    def snapshot_ranges(self, snapshot_id: int, rows_per_range: int) -> Sequence[tuple[bytes | None, bytes | None]]: ...

    def read_snapshot(
        self, snapshot_id: int, start_key: bytes | None, end_key: bytes | None, after_key: bytes | None,
        limit: int,
    ) -> Sequence[tuple[bytes, bytes]]: ...

    def drop_snapshot(self, snapshot_id: int) -> None: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def transaction(self) -> AbstractContextManager[Any]: ...
