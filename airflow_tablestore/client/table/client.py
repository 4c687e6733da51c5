"""``TableClient``: the Tablestore table-API client, which delegates to its DDL and row operations.

A ``TableClient`` owns (or borrows) one :class:`Transport` and holds two collaborators over it:
:class:`~airflow_tablestore.client.table.ddl.TableDdl` (create/describe/list/update/delete tables) and
:class:`~airflow_tablestore.client.table.rows.TableRows` (single-row and batch reads/writes, range scans).
Each public method calls one of them by name.

Rows use the shared model of :mod:`airflow_tablestore.client.model`: a primary key is a sequence of
``(name, value)`` pairs in schema order; attribute values map by Python type (``bytes`` is BINARY).
Service errors surface as the typed exceptions of :mod:`airflow_tablestore.client.errors`.

Reads are retried on server errors; writes only on throttling (see :class:`RetryPolicy`). ``write_rows``
chunks any number of writes into legal batches and never drops a row silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from airflow_tablestore.client.base_client import BaseClient
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
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.table.arguments import ColumnsArg, PrimaryKeyArg
from airflow_tablestore.client.table.batch_write import MAX_BATCH_WRITE_BYTES, MAX_BATCH_WRITE_ROWS
from airflow_tablestore.client.table.ddl import TableDdl, UpdateTableResult
from airflow_tablestore.client.table.rows import RowReadResult, TableRows
from airflow_tablestore.client.transport import DEFAULT_TIMEOUT, Transport


class TableClient(BaseClient):
    """Client of one Tablestore instance's table API.

    Build it from the endpoint and AccessKey (``region`` switches to V4 signing, ``sts_token`` adds an STS
    token), or from an existing :class:`Transport`. Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        access_key_id: str | None = None,
        access_key_secret: str | None = None,
        instance_name: str | None = None,
        *,
        sts_token: str | None = None,
        region: str | None = None,
        timeout: float | tuple[float, float] | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: Transport | None = None,
    ) -> None:
        super().__init__(
            endpoint, access_key_id, access_key_secret, instance_name, sts_token=sts_token, region=region,
            timeout=timeout, retry=retry, transport=transport,
        )
        self._ddl = TableDdl(self._transport)
        self._rows = TableRows(self._transport)

    def __repr__(self) -> str:
        transport = self._transport
        return f"TableClient(endpoint={transport.endpoint!r}, instance_name={transport.instance_name!r})"

    # -- tables (TableDdl) --------------------------------------------------------------------------
    def create_table(self, schema: TableSchema) -> None:
        """Create a table (primary key, defined columns, options, reserved throughput, optional stream)."""
        self._ddl.create_table(schema)

    def describe_table(self, name: str) -> TableDescription:
        """Schema, options, reserved throughput, stream details and shard splits of a table."""
        return self._ddl.describe_table(name)

    def list_tables(self) -> list[str]:
        """Names of all tables of the instance."""
        return self._ddl.list_tables()

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
        return self._ddl.update_table(name, options=options, reserved_throughput=reserved_throughput,
                                      stream=stream)

    def delete_table(self, name: str) -> None:
        """Delete a table and all its data."""
        self._ddl.delete_table(name)

    def compute_split_points_by_size(
        self, name: str, split_size_bytes: int, *, split_point_limit: int | None = None
    ) -> SplitPoints:
        """Split the table into key ranges of about ``split_size_bytes`` each (at most ``split_point_limit``
        split points); ``.ranges()`` of the answer covers the whole table once, for ``get_range``."""
        return self._ddl.compute_split_points_by_size(name, split_size_bytes, split_point_limit=split_point_limit)

    # -- single rows (TableRows) --------------------------------------------------------------------
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
        return self._rows.put_row(table, primary_key, columns, condition=condition,
                                  return_primary_key=return_primary_key)

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
        return self._rows.update_row(table, primary_key, columns, condition=condition,
                                     return_primary_key=return_primary_key)

    def delete_row(
        self, table: str, primary_key: PrimaryKeyArg, *, condition: Condition | None = None
    ) -> None:
        """Delete a whole row (succeeds on an absent row unless the condition says otherwise)."""
        self._rows.delete_row(table, primary_key, condition=condition)

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
        return self._rows.get_row(
            table, primary_key, columns=columns, max_versions=max_versions, time_range=time_range,
            column_filter=column_filter, start_column=start_column, end_column=end_column,
        )

    # -- batches (TableRows) ------------------------------------------------------------------------
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
        return self._rows.batch_get_row(
            table, primary_keys, columns=columns, max_versions=max_versions, time_range=time_range,
            column_filter=column_filter,
        )

    def get_rows(
        self, table: str, primary_keys: Iterable[PrimaryKeyArg], **read_options: Any
    ) -> list[Row | None]:
        """Read any number of rows (chunked by 100); raises the first per-row error."""
        return self._rows.get_rows(table, primary_keys, **read_options)

    def batch_write_row(self, writes: Sequence[RowWrite]) -> list[RowWriteResult]:
        """Apply up to 200 row writes (any tables) in one request; one result per write, in order."""
        return self._rows.batch_write_row(writes)

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
        return self._rows.write_rows(writes, max_attempts=max_attempts, max_batch_rows=max_batch_rows,
                                     max_batch_bytes=max_batch_bytes, fenced=fenced)

    # -- ranges (TableRows) -------------------------------------------------------------------------
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
        return self._rows.get_range(
            table, start, end, direction=direction, limit=limit, columns=columns, max_versions=max_versions,
            time_range=time_range, column_filter=column_filter,
        )

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
        return self._rows.iter_range(
            table, start, end, direction=direction, limit=limit, page_size=page_size, columns=columns,
            max_versions=max_versions, time_range=time_range, column_filter=column_filter,
        )
