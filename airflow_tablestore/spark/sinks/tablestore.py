"""The Tablestore sink: replays changes into a replica table, fenced against late and replayed writes.

Each record becomes one conditional write (:func:`~airflow_tablestore.client.replica.fenced_write`) in channel
order; a batch never holds the same row twice, so the order of a row's changes is kept. Writes the server
refuses with ``OTSConditionCheckFail`` found newer state and are counted, not retried; rows that still fail
after retries for any other reason fail the task (never dropped). ``fence_column=""`` turns the fence off
(plain puts, updates and deletes with the original cell versions: exact only without late writes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.model import PrimaryKey, Record, RowWrite
from airflow_tablestore.client.replica import FENCE_COLUMN, fenced_write, write_fenced
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.spark.arrow.changes import record_to_write

FLUSH_ROWS = 1000
"""Buffered writes per ``write_rows`` call (it chunks them into legal ≤200-row batches)."""


class _TablestoreWriter:
    def __init__(self, client: Any, table: str, fence_column: str) -> None:
        self._client = client
        self._table = table
        self._fence_column = fence_column
        self._buffer: list[RowWrite] = []
        self._keys: set[PrimaryKey] = set()
        self._count = 0
        self.refused = 0

    def _to_write(self, record: Record) -> RowWrite | None:
        if self._fence_column:
            return fenced_write(self._table, record, self._fence_column)
        return record_to_write(self._table, record)

    def write(self, records: Sequence[Record]) -> None:
        for record in records:
            self._count += 1
            write = self._to_write(record)
            if write is None:
                continue
            if write.primary_key in self._keys or len(self._buffer) >= FLUSH_ROWS:
                self._flush()  # one row at most once per batch: order between changes of a row is kept
            self._buffer.append(write)
            self._keys.add(write.primary_key)

    def _flush(self) -> None:
        if self._buffer:
            if self._fence_column:  # refused: the row already holds this change or a newer one
                self.refused += write_fenced(self._client, self._buffer)
            else:
                self._client.write_rows(self._buffer)
        self._buffer = []
        self._keys = set()

    def abort(self) -> None:
        """Drop what is buffered (writes that landed are fenced; the replay repeats them harmlessly)."""
        self._buffer = []
        with contextlib.suppress(Exception):
            self._client.close()

    def close(self, end_token: str) -> int:
        try:
            self._flush()
        finally:
            self._client.close()
        return self._count


@dataclass(frozen=True)
class TablestoreSink:
    """Replicate into ``table`` of the instance described by ``settings``, fenced by ``fence_column``."""

    settings: ConnectionSettings
    table: str
    request_timeout: float = 60.0
    fence_column: str = FENCE_COLUMN

    def describe(self) -> str:
        fence = f"fence column {self.fence_column!r}" if self.fence_column else "no fence"
        return f"tablestore table {self.table!r} on {self.settings.endpoint} ({self.settings.instance_name}, {fence})"

    def check(self) -> None:
        client = self.settings.table_client(timeout=self.request_timeout)
        try:
            client.describe_table(self.table)
        finally:
            client.close()

    def open(self, channel_id: str, start_token: str, sequence: int) -> _TablestoreWriter:
        return _TablestoreWriter(self.settings.table_client(timeout=self.request_timeout), self.table,
                                 self.fence_column)

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        """Nothing to do: every write is visible (and fenced) when it lands."""

    def recover(self, channel_id: str, token: str, sequence: int) -> None:
        """Nothing to do: there is no staged output."""

    def staged_channels(self) -> list[str]:
        return []
