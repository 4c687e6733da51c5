"""Pieces of the table API's row reads: read options onto a request, decoded answers, per-key batch results.

:class:`~airflow_tablestore.client.table.client.TableClient` owns the operations and builds its requests and
reads its answers with these.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError, TablestoreError
from airflow_tablestore.client.model import (
    ColumnCondition,
    PrimaryKey,
    Row,
    TimeRange,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.client.table.conditions import encode_filter
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

log = logging.getLogger(__name__)

MAX_BATCH_GET_ROWS = 100
_RT_PK = 1


@dataclass(frozen=True)
class RowReadResult:
    """Outcome of one key of a ``batch_get_row``, in request order; ``row`` is None when absent."""

    index: int
    primary_key: PrimaryKey
    ok: bool
    row: Row | None = None
    error: TablestoreError | None = None


def time_range_pb(time_range: TimeRange | None) -> Any:
    if time_range is None:
        return None
    message = table_pb2.TimeRange()
    if time_range.specific is not None:
        message.specific_time = time_range.specific
    if time_range.start is not None:
        message.start_time = time_range.start
    if time_range.end is not None:
        message.end_time = time_range.end
    return message


def apply_read_options(
    message: Any,
    columns: Iterable[str] | None,
    max_versions: int | None,
    time_range: TimeRange | None,
    column_filter: ColumnCondition | None,
    start_column: str | None = None,
    end_column: str | None = None,
) -> None:
    if columns is not None:
        if isinstance(columns, str):
            raise TablestoreClientError("columns must be a list of column names, not a single string")
        message.columns_to_get.extend(columns)
    if max_versions is None and time_range is None:
        raise TablestoreClientError("give max_versions or time_range (at least one version condition)")
    if max_versions is not None:
        message.max_versions = max_versions
    if time_range is not None:
        message.time_range.CopyFrom(time_range_pb(time_range))
    if column_filter is not None:
        message.filter = encode_filter(column_filter)
    if start_column is not None:
        message.start_column = start_column
    if end_column is not None:
        message.end_column = end_column


def decode_optional_row(data: bytes) -> Row | None:
    """A row answer's row; None for an empty answer (the row does not exist)."""
    return decode_row(data) if data else None


def returned_key(response: Any) -> PrimaryKey | None:
    """The primary key a write answer returned (asked for with ``return_primary_key``), else None."""
    if response.HasField("row") and response.row:
        row = decode_row(response.row)
        return row.primary_key if row is not None else None
    return None


def next_key(data: bytes) -> PrimaryKey | None:
    """A GetRange answer's next start key (None: the range is exhausted)."""
    if not data:
        return None
    decoded = decode_row(data)
    return decoded.primary_key if decoded is not None else None
