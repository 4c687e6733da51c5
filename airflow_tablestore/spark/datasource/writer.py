"""The write path of the ``tablestore`` format: Arrow batches -> put or update row writes in legal batches.

``df.write.format("tablestore").option("table", T).mode("append").save()`` turns each Arrow batch Spark hands
an executor into :class:`~airflow_tablestore.client.model.RowWrite` s column by column (no Spark ``Row``
objects) and writes them through ``TableClient.write_rows``: batches of at most ``batch_rows`` (≤ 200) rows and
4 MB, per-row retries of retryable failures, never a row dropped. A row that still fails fails the task with
the number of failed rows and one example (its key and the server's error).

* ``row_change=put`` (default): each row replaces the stored row (PutRow): columns that are null are absent.
* ``row_change=update``: each row's columns are set (UpdateRow), null columns are deleted (all versions);
  columns the DataFrame does not have are left as they are.
* A column of type ``array<struct<timestamp: long, value: T>>`` (what a read with ``max_versions > 1`` gives)
  writes one cell version per element, with its timestamp (ms).
* ``fence_by=COL``: each write is conditional on the stored ``COL`` being older (smaller) than the row's, the
  mechanism of the replication sink's fence (:mod:`~airflow_tablestore.client.replica`): a retried task, a
  speculative copy or an older DataFrame never rolls a row back. Refused writes are counted, not errors. The
  stored ``COL`` must have the column's Tablestore type, or every write is refused: a defined column of
  another type is refused on the driver (DescribeTable); stored values of another type cannot be seen there.

Save modes: ``append`` writes; ``overwrite`` is refused with one line (replacing a table's contents means
deleting every other row, which a key-value store cannot do atomically; ``row_change=put`` already replaces
each written row); ``errorifexists`` (Spark's default) and ``ignore`` are refused by Spark itself for Python
data sources.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from airflow_tablestore.client.errors import BatchWriteError, NotFoundError, TablestoreClientError
from airflow_tablestore.client.model import (
    CellOp,
    Column,
    ColumnType,
    Condition,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    RowWriteResult,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.replica import CONDITION_FAILED, fenced_row_write, write_fenced
from airflow_tablestore.spark.arrow.values import key_text
from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions

log = logging.getLogger(__name__)

OVERWRITE_REFUSED = (
    "format 'tablestore' does not support mode('overwrite') (it would have to delete every row the DataFrame "
    "does not hold, which a key-value store cannot do atomically): use mode('append'), whose row_change=put "
    "replaces each written row"
)

_INTEGERS = (LongType, IntegerType, ShortType, ByteType)
_DOUBLES = (DoubleType, FloatType)
_PK_SPARK_TYPES: dict[PrimaryKeyType, tuple[type[DataType], ...]] = {
    PrimaryKeyType.INTEGER: _INTEGERS,
    PrimaryKeyType.STRING: (StringType,),
    PrimaryKeyType.BINARY: (BinaryType,),
}
_VALUE_TYPES = (*_INTEGERS, *_DOUBLES, BooleanType, StringType, BinaryType)
_EXAMPLE_LIMIT = 300


class WriteFailedError(TablestoreClientError):
    """Rows of a ``df.write`` could not be written, even after retries (the task, and so the job, fails)."""

    def __init__(self, message: str, code: str = "TablestoreWriteFailed", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


@dataclass
class TablestoreCommitMessage(WriterCommitMessage):
    """What one write task did: rows written (including refused ones) and writes the fence refused."""

    rows: int = 0
    refused: int = 0


@dataclass(frozen=True)
class _Cell:
    """How one DataFrame column becomes cells: its name, position and whether it holds versions."""

    name: str
    index: int
    versioned: bool


@dataclass(frozen=True)
class WritePlan:
    """Which DataFrame column is which primary-key column and which columns become cells (checked once)."""

    table: str
    primary_key: tuple[tuple[str, int], ...]
    cells: tuple[_Cell, ...]
    kind: WriteType
    fence_by: str | None
    fence_index: int | None
    integer_key: tuple[bool, ...]


def _is_versions(data_type: DataType) -> DataType | None:
    """The value type of an ``array<struct<timestamp: long, value: T>>`` column, else None."""
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return None
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    if set(fields) != {"timestamp", "value"} or not isinstance(fields["timestamp"], _INTEGERS):
        return None
    return fields["value"]


def _tablestore_type(data_type: DataType) -> ColumnType | None:
    """The Tablestore type a DataFrame column's values are written as, or None."""
    if isinstance(data_type, _INTEGERS):
        return ColumnType.INTEGER
    if isinstance(data_type, _DOUBLES):
        return ColumnType.DOUBLE
    for spark_type, kind in ((BooleanType, ColumnType.BOOLEAN), (StringType, ColumnType.STRING),
                             (BinaryType, ColumnType.BINARY)):
        if isinstance(data_type, spark_type):
            return kind
    return None


def plan_write(schema: StructType, options: SourceOptions, primary_key: Sequence[PrimaryKeyColumn],
               defined_columns: Sequence[DefinedColumn] = ()) -> WritePlan:
    """Check the DataFrame's schema against the table's primary key (and, for ``fence_by``, its defined columns)
    and Tablestore's types; one clear error each."""
    positions = {f.name: i for i, f in enumerate(schema.fields)}
    by_lower = {f.name.lower(): f.name for f in schema.fields}
    key: list[tuple[str, int]] = []
    integer_key: list[bool] = []
    for column in primary_key:
        if column.name not in positions:
            hint = f" (the DataFrame has {by_lower[column.name.lower()]!r}: names are case-sensitive)" \
                if column.name.lower() in by_lower else ""
            what = "an auto-increment primary-key column: give its values (a retried task would otherwise insert " \
                "its rows twice)" if column.auto_increment else "a primary-key column"
            raise OptionError(f"the DataFrame has no column {column.name!r}, {what} of table "
                              f"{options.table!r}{hint}")
        field = schema.fields[positions[column.name]]
        if not isinstance(field.dataType, _PK_SPARK_TYPES[column.type]):
            raise OptionError(f"primary-key column {column.name!r} of table {options.table!r} is "
                              f"{column.type.value}; the DataFrame's is {field.dataType.simpleString()}")
        key.append((column.name, positions[column.name]))
        integer_key.append(column.type is PrimaryKeyType.INTEGER)
    key_names = {name for name, _ in key}
    cells: list[_Cell] = []
    for index, field in enumerate(schema.fields):
        if field.name in key_names:
            continue
        value_type = _is_versions(field.dataType)
        versioned = value_type is not None
        if not isinstance(value_type if versioned else field.dataType, _VALUE_TYPES):
            raise OptionError(
                f"column {field.name!r} is {field.dataType.simpleString()}, which Tablestore cannot store "
                "exactly: cast it to long, double, boolean, string or binary (or "
                "array<struct<timestamp: long, value: T>> for cell versions)")
        cells.append(_Cell(field.name, index, versioned))
    fence_index = None
    if options.fence_by:
        if options.fence_by not in positions or options.fence_by in key_names:
            raise OptionError(f"fence_by column {options.fence_by!r} must be a column of the DataFrame that is not "
                              "part of the primary key")
        fence_type = schema.fields[positions[options.fence_by]].dataType
        fence_kind = _tablestore_type(fence_type)
        if fence_kind is None or fence_kind is ColumnType.BOOLEAN:
            raise OptionError(f"fence_by column {options.fence_by!r} is {fence_type.simpleString()}: it must be a "
                              "long, double, string or binary that grows with every newer write")
        stored = {c.name: c.type for c in defined_columns}.get(options.fence_by)
        if stored is not None and stored is not fence_kind:
            raise OptionError(
                f"fence_by column {options.fence_by!r} is {fence_type.simpleString()} (Tablestore "
                f"{fence_kind.value}) in the DataFrame but a {stored.value} defined column of table "
                f"{options.table!r}: the server never finds a stored fence of another type smaller, so every "
                "write would be refused; cast the column to the stored type")
        fence_index = positions[options.fence_by]
    if options.row_change == "update" and not cells:
        raise OptionError("row_change=update needs at least one column besides the primary key")
    kind = WriteType.UPDATE if options.row_change == "update" else WriteType.PUT
    return WritePlan(options.table, tuple(key), tuple(cells), kind, options.fence_by, fence_index,
                     tuple(integer_key))


class _Invalid(Exception):
    """A row that cannot become a write (a null key or fence): reported with the task's failures."""


def _versions(name: str, versions: list[dict[str, Any]] | None, delete_missing: bool) -> list[Column]:
    if not versions:
        return [Column(name, None, None, CellOp.DELETE_ALL_VERSIONS)] if delete_missing else []
    return [Column(name, version["value"], version["timestamp"]) for version in versions
            if version is not None and version["value"] is not None]


def _cell(name: str, value: Any) -> Column:
    return tuple.__new__(Column, (name, value, None, CellOp.PUT))  # Column(name, value), without its __new__


def batch_writes(plan: WritePlan, batch: Any) -> tuple[list[RowWrite], list[tuple[Any, str]]]:
    """One Arrow batch -> its row writes, column-wise; plus the rows that cannot be written (key, reason)."""
    update = plan.kind is WriteType.UPDATE
    absent = Column("", None, None, CellOp.DELETE_ALL_VERSIONS) if update else None
    key_columns = [[(name, value) for value in batch.column(index).to_pylist()] for name, index in plan.primary_key]
    keys = list(zip(*key_columns, strict=True))
    per_column: list[list[Any]] = []
    for cell in plan.cells:
        values = batch.column(cell.index).to_pylist()
        if cell.versioned:
            per_column.append([_versions(cell.name, v, update) for v in values])
        else:
            deleted = absent._replace(name=cell.name) if absent is not None else None
            per_column.append([_cell(cell.name, v) if v is not None else deleted for v in values])
    versioned = [i for i, cell in enumerate(plan.cells) if cell.versioned]
    fences = batch.column(plan.fence_index).to_pylist() if plan.fence_index is not None else None
    writes: list[RowWrite] = []
    invalid: list[tuple[Any, str]] = []
    no_condition = Condition()
    rows = zip(*per_column, strict=True) if per_column else ((),) * batch.num_rows
    for row, (primary_key, cells) in enumerate(zip(keys, rows, strict=True)):
        if None in (value for _, value in primary_key):
            invalid.append((primary_key, "a primary-key column is null"))
            continue
        if versioned:
            columns = tuple(c for i, item in enumerate(cells)
                            for c in (item if i in versioned else (item,)) if c is not None)
        else:
            columns = tuple(c for c in cells if c is not None)
        if fences is None:
            writes.append(RowWrite(plan.table, plan.kind, primary_key, columns, no_condition))
            continue
        fence = fences[row]
        if fence is None:
            invalid.append((primary_key, f"its fence_by column {plan.fence_by!r} is null"))
            continue
        assert plan.fence_by is not None
        writes.append(fenced_row_write(plan.table, plan.kind, primary_key, columns, plan.fence_by, fence,
                                       carries_fence=True))
    return writes, invalid


def failure_message(table: str, failed: int, attempted: int, example_key: Any, reason: str,
                    retried: bool = False) -> str:
    """The one line a failed write task ends with: how many rows failed and one example (``retried``: some were
    sent more than once before they failed)."""
    after = " after retries" if retried else ""
    return (f"{failed} of {attempted} row(s) could not be written to table {table!r}{after}; e.g. the "
            f"row {key_text(example_key, _EXAMPLE_LIMIT)}: {reason[:_EXAMPLE_LIMIT]}")


def _failed_rows(exc: BatchWriteError, fenced: bool) -> list[RowWriteResult]:
    return [f for f in exc.failures if not (fenced and getattr(f.error, "code", None) == CONDITION_FAILED)]


class TablestoreWriter(DataSourceArrowWriter):
    """``df.write`` of format ``tablestore``: created on the driver, pickled to every write task."""

    def __init__(self, options: SourceOptions, schema: StructType, overwrite: bool,
                 describe: Callable[[SourceOptions], TableSchema] | None = None) -> None:
        if overwrite:
            raise OptionError(OVERWRITE_REFUSED)
        self.options = options
        table = (describe or _describe_table)(options)
        self.plan = plan_write(schema, options, table.primary_key, table.defined_columns)

    def __repr__(self) -> str:
        return f"TablestoreWriter(table={self.options.table!r}, row_change={self.options.row_change!r})"

    def write(self, iterator: Iterator[Any]) -> TablestoreCommitMessage:
        """Write every batch of this task; raise :class:`WriteFailedError` (count and example) if rows failed."""
        plan, options = self.plan, self.options
        message = TablestoreCommitMessage()
        failed = 0
        retried = False
        example: tuple[Any, str] | None = None
        client = options.settings.table_client()
        try:
            for batch in iterator:
                writes, invalid = batch_writes(plan, batch)
                message.rows += batch.num_rows
                if invalid:
                    failed += len(invalid)
                    example = example or invalid[0]
                try:
                    if plan.fence_by:
                        message.refused += write_fenced(client, writes, max_batch_rows=options.batch_rows)
                    else:
                        client.write_rows(writes, max_batch_rows=options.batch_rows)
                except BatchWriteError as exc:
                    rows = _failed_rows(exc, bool(plan.fence_by))
                    message.refused += len(exc.failures) - len(rows)
                    failed += len(rows) + exc.not_attempted
                    retried = retried or any(row.attempts > 1 for row in rows)
                    if rows and example is None:
                        error = rows[0].error
                        example = (rows[0].write.primary_key, f"{type(error).__name__}: {error}")
                    if exc.not_attempted:  # a whole request failed: the rest of the task would fail the same way
                        key, reason = example or ((), str(exc))
                        raise WriteFailedError(failure_message(plan.table, failed, message.rows, key, reason,
                                                               retried=retried)) from None
        finally:
            client.close()
        if failed:
            key, reason = example or ((), "unknown")
            raise WriteFailedError(failure_message(plan.table, failed, message.rows, key, reason, retried=retried))
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, TablestoreCommitMessage)]
        rows, refused = sum(m.rows for m in done), sum(m.refused for m in done)
        fence = f", {refused} refused by the fence (the table held them or newer)" if self.plan.fence_by else ""
        driver_line(f"wrote {rows} row(s) to table {self.options.table!r} in {len(done)} task(s){fence}")
        if self.plan.fence_by and rows and refused == rows:
            log.warning("the fence refused every one of the %d row(s) written to table %r: if its stored %r values "
                        "are of another type than the DataFrame's, every write is refused", rows, self.options.table,
                        self.plan.fence_by)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, TablestoreCommitMessage)]
        log.warning("the write to table %r failed; %d task(s) finished and their %d row(s) stay written (Tablestore "
                    "has no multi-row transactions): writing the DataFrame again re-sends them, which leaves the "
                    "same values, but adds versions with row_change=update on a multi-version table (fence_by "
                    "refuses the re-sent rows)", self.options.table, len(done), sum(m.rows for m in done))


def driver_line(text: str) -> None:
    """One line for the driver's log, from :meth:`TablestoreWriter.commit`. Spark runs ``commit`` in a Python
    worker it starts on the driver, with the tasks' commit messages: that process's stderr is the driver's, but its
    logging is not configured (an INFO record would be dropped), so the line is written to stderr."""
    print(f"INFO tablestore: {text}", file=sys.stderr, flush=True)


def _describe_table(options: SourceOptions) -> TableSchema:
    client = options.settings.table_client()
    try:
        return client.describe_table(options.table).schema
    except NotFoundError:
        raise OptionError(f"table {options.table!r} does not exist: create it first (format 'tablestore' "
                          "writes rows, it does not create tables)") from None
    finally:
        client.close()
