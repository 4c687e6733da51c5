"""Table-API rows: the requests that read and write single rows, batches and ranges.

Rows use the shared model of :mod:`airflow_tablestore.client.model`: a primary key is a sequence of
``(name, value)`` pairs in schema order; attribute values map by Python type (``bytes`` is BINARY).
Reads are retried on server errors; writes only on throttling (see :class:`RetryPolicy`). ``write_rows``
chunks any number of writes into legal batches and never drops a row silently.

:class:`TableRows` sends them over the transport it is given;
:class:`~airflow_tablestore.client.table.client.TableClient` holds one and delegates its row methods to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError, TablestoreError, error_from_response
from airflow_tablestore.client.model import (
    ColumnCondition,
    Condition,
    Direction,
    PrimaryKey,
    Row,
    RowWrite,
    RowWriteResult,
    TimeRange,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.client.plainbuffer.encode import encode_primary_key, encode_row
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.table.arguments import (
    ColumnsArg,
    PrimaryKeyArg,
    normalize_columns,
    normalize_primary_key,
    table_name,
)
from airflow_tablestore.client.table.batch_write import MAX_BATCH_WRITE_BYTES, MAX_BATCH_WRITE_ROWS
from airflow_tablestore.client.table.batch_write import batch_write_row as _batch_write_row
from airflow_tablestore.client.table.batch_write import write_rows as _write_rows
from airflow_tablestore.client.table.conditions import condition_to_pb, encode_filter
from airflow_tablestore.client.transport import Transport
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


def _time_range_pb(time_range: TimeRange | None) -> Any:
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


def _apply_read_options(
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
        message.time_range.CopyFrom(_time_range_pb(time_range))
    if column_filter is not None:
        message.filter = encode_filter(column_filter)
    if start_column is not None:
        message.start_column = start_column
    if end_column is not None:
        message.end_column = end_column


def _decode_row(data: bytes) -> Row | None:
    return decode_row(data) if data else None


class TableRows:
    """The row operations of :class:`~airflow_tablestore.client.table.client.TableClient`.

    Sends each request over ``transport``, which it borrows: the client owns it and closes it.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    # -- single rows --------------------------------------------------------------------------------
    def put_row(
        self,
        table: str,
        primary_key: PrimaryKeyArg,
        columns: ColumnsArg | None = None,
        *,
        condition: Condition | None = None,
        return_primary_key: bool = False,
    ) -> PrimaryKey | None:
        """Write a whole row (replacing any existing one). Returns the primary key if
        ``return_primary_key`` (how auto-increment values come back)."""
        row = Row(normalize_primary_key(primary_key), normalize_columns(columns))
        request = table_pb2.PutRowRequest(
            table_name=table_name(table), row=encode_row(row), condition=condition_to_pb(condition)
        )
        if return_primary_key:
            request.return_content.return_type = _RT_PK
        response = self._transport.call("/PutRow", request, table_pb2.PutRowResponse, idempotent=False)
        return self._returned_key(response)

    def update_row(
        self,
        table: str,
        primary_key: PrimaryKeyArg,
        columns: ColumnsArg,
        *,
        condition: Condition | None = None,
        return_primary_key: bool = False,
    ) -> PrimaryKey | None:
        """Put, delete (one version / all versions) or increment the given columns of one row."""
        changes = normalize_columns(columns)
        if not changes:
            raise TablestoreClientError("update_row needs at least one column change")
        row = Row(normalize_primary_key(primary_key), changes)
        request = table_pb2.UpdateRowRequest(
            table_name=table_name(table), row_change=encode_row(row),
            condition=condition_to_pb(condition),
        )
        if return_primary_key:
            request.return_content.return_type = _RT_PK
        response = self._transport.call("/UpdateRow", request, table_pb2.UpdateRowResponse, idempotent=False)
        return self._returned_key(response)

    def delete_row(
        self, table: str, primary_key: PrimaryKeyArg, *, condition: Condition | None = None
    ) -> None:
        """Delete a whole row (succeeds on an absent row unless the condition says otherwise)."""
        row = Row(normalize_primary_key(primary_key), (), delete_marker=True)
        request = table_pb2.DeleteRowRequest(
            table_name=table_name(table), primary_key=encode_row(row),
            condition=condition_to_pb(condition),
        )
        self._transport.call("/DeleteRow", request, table_pb2.DeleteRowResponse, idempotent=False)

    @staticmethod
    def _returned_key(response: Any) -> PrimaryKey | None:
        if response.HasField("row") and response.row:
            row = decode_row(response.row)
            return row.primary_key if row is not None else None
        return None

    def get_row(
        self,
        table: str,
        primary_key: PrimaryKeyArg,
        *,
        columns: Iterable[str] | None = None,
        max_versions: int | None = 1,
        time_range: TimeRange | None = None,
        column_filter: ColumnCondition | None = None,
        start_column: str | None = None,
        end_column: str | None = None,
    ) -> Row | None:
        """Read one row; None when it does not exist (or the filter rejects it)."""
        request = table_pb2.GetRowRequest(
            table_name=table_name(table), primary_key=encode_primary_key(normalize_primary_key(primary_key))
        )
        _apply_read_options(
            request, columns, max_versions, time_range, column_filter, start_column, end_column
        )
        response = self._transport.call("/GetRow", request, table_pb2.GetRowResponse, idempotent=True)
        return _decode_row(response.row)

    # -- batches ------------------------------------------------------------------------------------
    def batch_get_row(
        self,
        table: str,
        primary_keys: Sequence[PrimaryKeyArg],
        *,
        columns: Iterable[str] | None = None,
        max_versions: int | None = 1,
        time_range: TimeRange | None = None,
        column_filter: ColumnCondition | None = None,
    ) -> list[RowReadResult]:
        """Read up to 100 rows of one table in one request; one result per key, in order."""
        keys = [normalize_primary_key(pk) for pk in primary_keys]
        if not keys:
            return []
        if len(keys) > MAX_BATCH_GET_ROWS:
            raise TablestoreClientError(
                f"batch_get_row takes at most {MAX_BATCH_GET_ROWS} keys, got {len(keys)}; "
                "use get_rows() to chunk"
            )
        item = table_pb2.TableInBatchGetRowRequest(table_name=table_name(table))
        item.primary_key.extend(encode_primary_key(key) for key in keys)
        _apply_read_options(item, columns, max_versions, time_range, column_filter)
        request = table_pb2.BatchGetRowRequest(tables=[item])
        response, request_id = self._transport.call_detailed(
            "/BatchGetRow", request, table_pb2.BatchGetRowResponse, idempotent=True
        )
        rows = [row for table_result in response.tables for row in table_result.rows]
        if len(rows) != len(keys):
            raise TablestoreClientError(
                f"BatchGetRow answered {len(rows)} rows for {len(keys)} keys", request_id=request_id
            )
        results = []
        for index, (key, answer) in enumerate(zip(keys, rows, strict=True)):
            if answer.is_ok:
                results.append(RowReadResult(index, key, True, _decode_row(answer.row)))
            else:
                error = error_from_response(answer.error.code, answer.error.message, None, request_id)
                results.append(RowReadResult(index, key, False, error=error))
        return results

    def get_rows(
        self, table: str, primary_keys: Iterable[PrimaryKeyArg], **read_options: Any
    ) -> list[Row | None]:
        """Read any number of rows (chunked by 100); raises the first per-row error."""
        keys = list(primary_keys)
        rows: list[Row | None] = []
        for start in range(0, len(keys), MAX_BATCH_GET_ROWS):
            for result in self.batch_get_row(table, keys[start:start + MAX_BATCH_GET_ROWS], **read_options):
                if not result.ok:
                    assert result.error is not None
                    raise result.error
                rows.append(result.row)
        return rows

    def batch_write_row(self, writes: Sequence[RowWrite]) -> list[RowWriteResult]:
        """Apply up to 200 row writes (any tables) in one request; one result per write, in order."""
        return _batch_write_row(self._transport, writes)

    def write_rows(
        self,
        writes: Iterable[RowWrite],
        *,
        max_attempts: int = 5,
        max_batch_rows: int = MAX_BATCH_WRITE_ROWS,
        max_batch_bytes: int = MAX_BATCH_WRITE_BYTES,
        fenced: bool = False,
    ) -> int:
        """Write any number of rows in legal batches (≤200 rows, ≤4 MB); return how many were written.

        ``fenced=True``: the writes' conditions are fences, so batches may be re-sent after a 5xx or timeout.
        Writes are applied in iteration order per row; rows failing with a retryable per-row error are
        retried (up to ``max_attempts`` tries each). If any row still fails, or a whole batch request fails,
        raises :class:`BatchWriteError` listing every failed row: see
        :func:`airflow_tablestore.client.table.batch_write.write_rows`.
        """
        return _write_rows(
            self._transport, writes, max_attempts=max_attempts, max_batch_rows=max_batch_rows,
            max_batch_bytes=max_batch_bytes, fenced=fenced,
        )

    # -- ranges -------------------------------------------------------------------------------------
    def get_range(
        self,
        table: str,
        start: PrimaryKeyArg,
        end: PrimaryKeyArg,
        *,
        direction: Direction = Direction.FORWARD,
        limit: int | None = None,
        columns: Iterable[str] | None = None,
        max_versions: int | None = 1,
        time_range: TimeRange | None = None,
        column_filter: ColumnCondition | None = None,
    ) -> tuple[Rows, PrimaryKey | None]:
        """One page of rows from ``start`` (inclusive) to ``end`` (exclusive) and the next start key
        (None when the range is exhausted). BACKWARD scans need ``start`` > ``end``. The rows come as one
        :class:`~airflow_tablestore.client.plainbuffer.rows.Rows` batch, decoded on first use."""
        data, next_raw = self._get_range(table, start, end, direction, limit, columns, max_versions, time_range,
                                         column_filter)
        return Rows(data), _next_key(next_raw)

    def _get_range(self, table: str, start: PrimaryKeyArg, end: PrimaryKeyArg, direction: Direction,
                   limit: int | None, columns: Iterable[str] | None, max_versions: int | None,
                   time_range: TimeRange | None, column_filter: ColumnCondition | None) -> tuple[bytes, bytes]:
        """The GetRange call: the page's rows and its next start key, both encoded (b"" for none)."""
        request = table_pb2.GetRangeRequest(
            table_name=table_name(table),
            direction=0 if Direction(direction) is Direction.FORWARD else 1,
            inclusive_start_primary_key=encode_primary_key(normalize_primary_key(start)),
            exclusive_end_primary_key=encode_primary_key(normalize_primary_key(end)),
        )
        if limit is not None:
            if limit <= 0:
                raise TablestoreClientError(f"limit must be positive, got {limit}")
            request.limit = limit
        _apply_read_options(request, columns, max_versions, time_range, column_filter)
        response = self._transport.call("/GetRange", request, table_pb2.GetRangeResponse, idempotent=True)
        next_raw = response.next_start_primary_key if response.HasField("next_start_primary_key") else b""
        return response.rows, next_raw

    def iter_range(
        self,
        table: str,
        start: PrimaryKeyArg,
        end: PrimaryKeyArg,
        *,
        direction: Direction = Direction.FORWARD,
        limit: int | None = None,
        page_size: int | None = None,
        columns: Iterable[str] | None = None,
        max_versions: int | None = 1,
        time_range: TimeRange | None = None,
        column_filter: ColumnCondition | None = None,
    ) -> Iterator[Row]:
        """All rows of a range, following ``next_start_primary_key`` page by page (``limit`` = total)."""
        remaining = limit
        cursor: PrimaryKeyArg | None = start
        pages = 0
        while cursor is not None and (remaining is None or remaining > 0):
            page_limit = page_size
            if remaining is not None:
                page_limit = remaining if page_limit is None else min(page_limit, remaining)
            rows, cursor = self.get_range(
                table, cursor, end, direction=direction, limit=page_limit, columns=columns,
                max_versions=max_versions, time_range=time_range, column_filter=column_filter,
            )
            pages += 1
            if pages % 100 == 0:
                log.info("iter_range %s: %d pages read", table, pages)
            yield from rows
            if remaining is not None:
                remaining -= len(rows)


def _next_key(data: bytes) -> PrimaryKey | None:
    """A GetRange answer's next start key (None: the range is exhausted)."""
    if not data:
        return None
    decoded = decode_row(data)
    return decoded.primary_key if decoded is not None else None
