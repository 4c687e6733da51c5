"""Pieces of the table API's batch writes: a write encoded once, one BatchWriteRow request, one legal batch
sent with per-row retries.

:class:`~airflow_tablestore.client.table.client.TableClient` owns ``batch_write_row`` and ``write_rows`` (the
chunking into legal batches) and sends each batch with these.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow_tablestore.client.errors import (
    TablestoreClientError,
    TablestoreError,
    error_from_response,
)
from airflow_tablestore.client.model import (
    CellOp,
    Column,
    Condition,
    PrimaryKey,
    Row,
    RowWrite,
    RowWriteResult,
    WriteType,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.client.plainbuffer.encode import encode_row
from airflow_tablestore.client.table.arguments import normalize_columns, normalize_primary_key, table_name
from airflow_tablestore.client.table.conditions import condition_to_pb
from airflow_tablestore.client.transport import Transport
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

log = logging.getLogger(__name__)

MAX_BATCH_WRITE_ROWS = 200
MAX_BATCH_WRITE_BYTES = 4 * 1024 * 1024
PROGRESS_ROWS = 50_000  # write_rows logs progress at INFO every this many rows
_OPERATION_TYPES = {WriteType.PUT: 1, WriteType.UPDATE: 2, WriteType.DELETE: 3}
# Per-row failures that are safe to retry when the row write itself is repeatable.
_ROW_SERVER_CODES = frozenset({"OTSInternalServerError", "OTSServerUnavailable", "OTSTimeout"})


def encode_write(write: RowWrite, *, fenced: bool = False) -> tuple[PrimaryKey, bytes, bool]:
    """One batch row, normalized and encoded once: its primary key, its PlainBuffer ``row_change``, and
    whether applying it twice equals applying it once (for retries after a server-side error). ``fenced``:
    the caller's conditions are fences (a second application is refused by its own condition), so a
    conditional write is repeatable too."""
    if not isinstance(write, RowWrite):
        raise TablestoreClientError(f"expected RowWrite, got {type(write).__name__}")
    primary_key = normalize_primary_key(write.primary_key)
    kind = WriteType(write.type)
    if kind is WriteType.DELETE:
        if write.columns:
            raise TablestoreClientError("a DELETE RowWrite takes no columns")
        columns: tuple[Column, ...] = ()
        row = Row(primary_key, (), delete_marker=True)
    else:
        columns = normalize_columns(write.columns)
        row = Row(primary_key, columns)
    repeatable = (fenced or write.condition == Condition()) and all(
        column.op != CellOp.INCREMENT for column in columns
    )
    return primary_key, encode_row(row), repeatable


def send_batch(
    transport: Transport, encoded: Sequence[tuple[RowWrite, bytes]], *, idempotent: bool = False
) -> list[RowWriteResult]:
    """One BatchWriteRow request of encoded writes (grouped by table); one result per write, in order."""
    if not encoded:
        return []
    groups: dict[str, list[int]] = {}
    for index, (write, _) in enumerate(encoded):
        groups.setdefault(table_name(write.table), []).append(index)
    request = table_pb2.BatchWriteRowRequest()
    for table, indexes in groups.items():
        item = request.tables.add(table_name=table)
        for index in indexes:
            write, row_change = encoded[index]
            item.rows.add(
                type=_OPERATION_TYPES[WriteType(write.type)], row_change=row_change,
                condition=condition_to_pb(write.condition),
            )
    response, request_id = transport.call_detailed(
        "/BatchWriteRow", request, table_pb2.BatchWriteRowResponse, idempotent=idempotent
    )
    results: list[RowWriteResult | None] = [None] * len(encoded)
    answers = list(response.tables)
    if len(answers) != len(groups):
        raise TablestoreClientError(
            f"BatchWriteRow answered {len(answers)} tables for {len(groups)}", request_id=request_id
        )
    for (table, indexes), answer in zip(groups.items(), answers, strict=True):
        if len(answer.rows) != len(indexes):
            raise TablestoreClientError(
                f"BatchWriteRow answered {len(answer.rows)} rows for {len(indexes)} of table {table!r}",
                request_id=request_id,
            )
        for index, row in zip(indexes, answer.rows, strict=True):
            write = encoded[index][0]
            if row.is_ok:
                returned = decode_row(row.row) if row.HasField("row") and row.row else None
                results[index] = RowWriteResult(write, index, True, row=returned)
            else:
                error = error_from_response(row.error.code, row.error.message, None, request_id)
                results[index] = RowWriteResult(write, index, False, error=error)
    return [result for result in results if result is not None]


def write_batch_with_retries(
    transport: Transport,
    batch: list[tuple[int, RowWrite, bytes, bool]],
    max_attempts: int,
    failures: list[RowWriteResult],
) -> int:
    """Write one legal batch, retrying retryable per-row failures; append final failures; return # ok."""
    policy = transport.retry
    pending = list(range(len(batch)))
    final: dict[int, RowWriteResult] = {}
    written = 0
    attempt = 1
    while pending:
        try:
            rows = [(batch[i][1], batch[i][2]) for i in pending]
            # A batch of repeatable writes may be re-sent after a 5xx/timeout: applying it twice is harmless.
            repeatable = all(batch[i][3] for i in pending)
            results = send_batch(transport, rows, idempotent=repeatable)
        except TablestoreError as exc:
            aborted = [RowWriteResult(batch[i][1], batch[i][0], False, error=exc, attempts=attempt) for i in pending]
            failures.extend(final.values())
            raise BatchAborted(exc, aborted, written, batch[-1][0]) from exc
        retry_next: list[int] = []
        retry_error: TablestoreError | None = None
        for local, result in zip(pending, results, strict=True):
            if result.ok:
                written += 1
                continue
            error = result.error
            retryable = isinstance(error, TablestoreError) and (
                policy.is_throttling(error)
                or (error.code in _ROW_SERVER_CODES and batch[local][3])
            )
            if retryable and attempt < max_attempts:
                retry_next.append(local)
                retry_error = retry_error or error  # type: ignore[assignment]
            else:
                final[local] = RowWriteResult(result.write, batch[local][0], False, error=error, attempts=attempt)
        if retry_next:
            wait = policy.delay(attempt, retry_error)
            log.warning(
                "write_rows: %d row(s) failed with retryable errors, attempt %d of %d; retrying in %.3fs",
                len(retry_next), attempt, max_attempts, wait,
            )
            policy.sleep(wait)
        pending = retry_next
        attempt += 1
    failures.extend(final.values())
    log.debug("write_rows: batch of %d row(s): %d written", len(batch), written)
    return written


class BatchAborted(Exception):
    """A whole batch request failed: ``write_rows`` stops there and reports what was written before it."""

    def __init__(
        self, error: TablestoreError, results: list[RowWriteResult], written: int, last_index: int
    ) -> None:
        super().__init__(error.code)
        self.error = error
        self.results = results
        self.written = written
        self.last_index = last_index
