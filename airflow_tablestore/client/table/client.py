"""``TableClient``: the Tablestore table-API client; each of its methods owns one operation.

A ``TableClient`` owns (or borrows) one :class:`Transport`. Each public method builds its request, sends it
and reads the answer; the request and answer pieces they share are in the sibling modules: ``arguments``
(primary keys, columns, table names), ``conditions``, ``schema`` (DDL requests and answers), ``ddl`` (split
points, ``update_table``'s result), ``rows`` (read options, decoded answers) and ``batch_write`` (encoded
writes, one batch with per-row retries).

Rows use the shared model of :mod:`airflow_tablestore.client.model`: a primary key is a sequence of
``(name, value)`` pairs in schema order; attribute values map by Python type (``bytes`` is BINARY).
Service errors surface as the typed exceptions of :mod:`airflow_tablestore.client.errors`.

Reads are retried on server errors; writes only on throttling (see :class:`RetryPolicy`). ``write_rows``
chunks any number of writes into legal batches and never drops a row silently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from airflow_tablestore.client.base_client import BaseClient
from airflow_tablestore.client.errors import (
    BatchWriteError,
    TablestoreClientError,
    TablestoreError,
    error_from_response,
)
from airflow_tablestore.client.model import (
    ColumnCondition,
    Condition,
    Direction,
    PrimaryKey,
    ReservedThroughput,
    Row,
    RowWrite,
    RowWriteResult,
    SplitPoints,
    StreamSpec,
    TableDescription,
    TableOptions,
    TableSchema,
    TimeRange,
)
from airflow_tablestore.client.plainbuffer.encode import encode_primary_key, encode_row
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.table.arguments import (
    ColumnsArg,
    PrimaryKeyArg,
    normalize_columns,
    normalize_primary_key,
    table_name,
)
from airflow_tablestore.client.table.batch_write import (
    MAX_BATCH_WRITE_BYTES,
    MAX_BATCH_WRITE_ROWS,
    PROGRESS_ROWS,
    BatchAborted,
    encode_write,
    send_batch,
    write_batch_with_retries,
)
from airflow_tablestore.client.table.conditions import condition_to_pb
from airflow_tablestore.client.table.ddl import UpdateTableResult, split_points_from_pb, split_size_units
from airflow_tablestore.client.table.rows import (
    MAX_BATCH_GET_ROWS,
    RowReadResult,
    apply_read_options,
    decode_optional_row,
    next_key,
    returned_key,
)
from airflow_tablestore.client.table.schema import (
    create_table_request,
    description_from_pb,
    options_from_pb,
    options_to_pb,
    partial_options_to_pb,
    reserved_throughput_to_pb,
    stream_details_from_pb,
    stream_spec_to_pb,
)
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

log = logging.getLogger(__name__)

_RT_PK = 1  # ReturnType RT_PK: the answer carries the written row's primary key


class TableClient(BaseClient):
    """Client of one Tablestore instance's table API.

    Build it from the endpoint and AccessKey (``region`` switches to V4 signing, ``sts_token`` adds an STS
    token), or from an existing :class:`Transport`. Use as a context manager or call :meth:`close`.
    """

    def __repr__(self) -> str:
        transport = self._transport
        return f"TableClient(endpoint={transport.endpoint!r}, instance_name={transport.instance_name!r})"

    # -- tables -------------------------------------------------------------------------------------
    def create_table(self, schema: TableSchema) -> None:
        """Create a table (primary key, defined columns, options, reserved throughput, optional stream)."""
        self._transport.call(
            "/CreateTable", create_table_request(schema), table_pb2.CreateTableResponse, idempotent=False
        )
        log.info("created table %s", schema.name)

    def describe_table(self, name: str) -> TableDescription:
        """Schema, options, reserved throughput, stream details and shard splits of a table."""
        request = table_pb2.DescribeTableRequest(table_name=table_name(name))
        response = self._transport.call(
            "/DescribeTable", request, table_pb2.DescribeTableResponse, idempotent=True
        )
        return description_from_pb(response)

    def list_tables(self) -> list[str]:
        """Names of all tables of the instance."""
        response = self._transport.call(
            "/ListTable", table_pb2.ListTableRequest(), table_pb2.ListTableResponse, idempotent=True
        )
        return list(response.table_names)

    def update_table(
        self,
        name: str,
        *,
        options: TableOptions | Mapping[str, Any] | None = None,
        reserved_throughput: ReservedThroughput | None = None,
        stream: StreamSpec | None = None,
    ) -> UpdateTableResult:
        """Change options, reserved throughput and/or the stream; returns the resulting settings.

        ``options`` as a :class:`TableOptions` sets all four options; as a mapping such as
        ``{"max_versions": 5}`` it changes only the named ones.
        """
        if options is None and reserved_throughput is None and stream is None:
            raise TablestoreClientError("update_table needs options, reserved_throughput or stream")
        request = table_pb2.UpdateTableRequest(table_name=table_name(name))
        if isinstance(options, TableOptions):
            request.table_options.CopyFrom(options_to_pb(options))
        elif options is not None:
            request.table_options.CopyFrom(partial_options_to_pb(options))
        if reserved_throughput is not None:
            request.reserved_throughput.CopyFrom(reserved_throughput_to_pb(reserved_throughput))
        if stream is not None:
            request.stream_spec.CopyFrom(stream_spec_to_pb(stream))
        response = self._transport.call(
            "/UpdateTable", request, table_pb2.UpdateTableResponse, idempotent=False
        )
        capacity = response.reserved_throughput_details.capacity_unit
        return UpdateTableResult(
            options=options_from_pb(response.table_options),
            reserved_throughput=ReservedThroughput(read=capacity.read, write=capacity.write),
            stream=stream_details_from_pb(
                response.stream_details if response.HasField("stream_details") else None
            ),
        )

    def delete_table(self, name: str) -> None:
        """Delete a table and all its data."""
        self._transport.call("/DeleteTable", table_pb2.DeleteTableRequest(table_name=table_name(name)),
                             table_pb2.DeleteTableResponse, idempotent=False)
        log.info("deleted table %s", name)

    def compute_split_points_by_size(
        self, name: str, split_size_bytes: int, *, split_point_limit: int | None = None
    ) -> SplitPoints:
        """Split the table into key ranges of about ``split_size_bytes`` each (at most ``split_point_limit``
        split points, units as :func:`~airflow_tablestore.client.table.ddl.split_size_units` picks them);
        ``.ranges()`` of the answer covers the whole table once, for ``get_range``."""
        if isinstance(split_size_bytes, bool) or not isinstance(split_size_bytes, int):
            raise TablestoreClientError(f"split_size_bytes must be an int, got {split_size_bytes!r}")
        split_size, unit = split_size_units(split_size_bytes)
        request = table_pb2.ComputeSplitPointsBySizeRequest(
            table_name=table_name(name), split_size=split_size, split_size_unit_in_byte=unit
        )
        if split_point_limit is not None:
            request.split_point_limit = split_point_limit
        response, request_id = self._transport.call_detailed(
            "/ComputeSplitPointsBySize", request, table_pb2.ComputeSplitPointsBySizeResponse, idempotent=True
        )
        return split_points_from_pb(response, request_id)

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
        return returned_key(response)

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
        return returned_key(response)

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
        apply_read_options(
            request, columns, max_versions, time_range, column_filter, start_column, end_column
        )
        response = self._transport.call("/GetRow", request, table_pb2.GetRowResponse, idempotent=True)
        return decode_optional_row(response.row)

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
        apply_read_options(item, columns, max_versions, time_range, column_filter)
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
                results.append(RowReadResult(index, key, True, decode_optional_row(answer.row)))
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
        encoded = [(write, encode_write(write)[1]) for write in writes]
        if len(encoded) > MAX_BATCH_WRITE_ROWS:
            raise TablestoreClientError(
                f"batch_write_row takes at most {MAX_BATCH_WRITE_ROWS} rows, got {len(encoded)}; "
                "use write_rows() to chunk"
            )
        return send_batch(self._transport, encoded)

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

        Writes are applied in iteration order per row: a row appearing again starts a new batch, so a
        retried write can never overtake a later write of the same row. ``fenced=True`` declares the writes'
        conditions to be fences (re-sending a write that landed is refused by its own condition), which lets
        batches of conditional writes be re-sent after a 5xx or a timeout like unconditional ones.

        Rows failing with a retryable per-row error are retried (up to ``max_attempts`` tries each, with
        backoff). If any row still fails, or a whole batch request fails, raises :class:`BatchWriteError`
        whose ``failures`` lists every failed :class:`RowWriteResult` (a failed request marks all of its
        rows failed; rows after it are not attempted and ``failures`` says so via ``not_attempted``).
        """
        if not 1 <= max_batch_rows <= MAX_BATCH_WRITE_ROWS:
            raise TablestoreClientError(f"max_batch_rows must be in 1..{MAX_BATCH_WRITE_ROWS}")
        written = 0
        failures: list[RowWriteResult] = []
        batch: list[tuple[int, RowWrite, bytes, bool]] = []
        batch_keys: set[tuple[str, PrimaryKey]] = set()
        batch_bytes = 0
        seen = 0
        next_progress = PROGRESS_ROWS
        iterator = iter(writes)
        try:
            for write in iterator:
                index = seen
                seen += 1
                try:
                    primary_key, row_change, repeatable = encode_write(write, fenced=fenced)
                except TablestoreClientError as exc:  # invalid input: report the row, keep going
                    failures.append(RowWriteResult(write, index, False, error=exc))
                    continue
                key = (write.table, primary_key)
                if batch and (
                    len(batch) >= max_batch_rows
                    or batch_bytes + len(row_change) > max_batch_bytes
                    or key in batch_keys  # a row at most once per batch: retries cannot reorder its writes
                ):
                    written += write_batch_with_retries(self._transport, batch, max_attempts, failures)
                    batch, batch_bytes = [], 0
                    batch_keys.clear()
                    if written >= next_progress:
                        log.info("write_rows: %d row(s) written so far, %d failed", written, len(failures))
                        next_progress = written + PROGRESS_ROWS
                batch.append((index, write, row_change, repeatable))
                batch_keys.add(key)
                batch_bytes += len(row_change)
            if batch:
                written += write_batch_with_retries(self._transport, batch, max_attempts, failures)
                batch = []
        except BatchAborted as aborted:
            written += aborted.written
            # rows pulled from the iterator after the failed batch, plus the rest of the iterator
            not_attempted = (seen - 1 - aborted.last_index) + sum(1 for _ in iterator)
            failures.extend(aborted.results)
            failures.sort(key=lambda result: result.index)
            error = BatchWriteError(
                f"write_rows stopped: a batch request failed with {aborted.error.code}: {aborted.error.message}; "
                f"{written} row(s) written, {len(failures)} failed, {not_attempted} not attempted",
                failures,
                written=written,
                not_attempted=not_attempted,
            )
            raise error from aborted.error
        if failures:
            failures.sort(key=lambda result: result.index)
            codes = sorted(
                {result.error.code for result in failures if isinstance(result.error, TablestoreError)}
            )
            retried = sum(1 for result in failures if result.attempts > 1)
            after = f", {retried} of them after retries" if retried else ""  # said only where a retry happened
            error = BatchWriteError(
                f"{len(failures)} of {seen} row(s) failed ({', '.join(codes) or 'errors'}{after}); "
                f"{written} written. See .failures for every failed row",
                failures,
                written=written,
            )
            raise error
        log.debug("write_rows: %d row(s) written", written)
        return written

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
        apply_read_options(request, columns, max_versions, time_range, column_filter)
        response = self._transport.call("/GetRange", request, table_pb2.GetRangeResponse, idempotent=True)
        next_raw = response.next_start_primary_key if response.HasField("next_start_primary_key") else b""
        return Rows(response.rows), next_key(next_raw)

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

