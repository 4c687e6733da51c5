"""``TablestoreReader``: plans a table's read as size splits and reads each one as Arrow batches, page by page.

On the driver (Spark's planning worker) the reader describes the table once, checks the schema
(:func:`~airflow_tablestore.spark.datasource.schema.read_fields`) and, in :meth:`TablestoreReader.partitions`,
asks ``ComputeSplitPointsBySize`` for ranges of about ``split_size_mb`` each: one Spark task per range (at most
``max_split_count``: adjacent ranges are merged), intersected with the key ranges of pushed filters. On an
executor, :meth:`TablestoreReader.read` pages through its ranges with GetRange (``page_rows`` a page; the
schema's columns, ``max_versions``, the time range and the pushed column filter sent with each page) and yields
each page as one Arrow record batch built by the shared core
(:class:`~airflow_tablestore.spark.arrow.values.RowsToArrow`).
Tombstones of a replica (rows that are only a deleted-marked fence) are skipped unless
``show_replication_columns``. With a time range, a row is returned only if a column of the schema (any column,
if the schema has only key columns; never the hidden fence) has a cell in the range. Each page
(:class:`~airflow_tablestore.client.plainbuffer.rows.Rows`) becomes its batch through
:meth:`~airflow_tablestore.spark.arrow.values.RowsToArrow.page`, those two filters included: straight from GetRange's
PlainBuffer bytes where the compiled module is in use, versioned columns included; anything that path leaves out
is decoded and converted from the rows.

:class:`TablestorePushdownReader` adds ``pushFilters``. PySpark refuses to plan a read with a reader that
implements it while ``spark.sql.python.filterPushdown.enabled`` is false (its default), so the data source
hands it out only to Spark's filter-pushdown step (see ``source.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from airflow_tablestore.client.model import ColumnCondition, PrimaryKeyColumn, TableSchema
from airflow_tablestore.spark.arrow.values import CELL, VERSIONS, RowsToArrow
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.datasource.pushdown import KeyRange, intersect, plan_pushdown
from airflow_tablestore.spark.datasource.schema import arrow_schema, read_fields

MB = 1024 * 1024


class KeyRangePartition(InputPartition):
    """One Spark task's share of the table: ``[start, end)`` primary-key ranges, read in order."""

    def __init__(self, index: int, ranges: Sequence[KeyRange]) -> None:
        super().__init__(index)
        self.index = index
        self.ranges = tuple(ranges)


def split_partitions(splits: Sequence[KeyRange], key_ranges: Sequence[KeyRange] | None,
                     max_count: int) -> list[KeyRangePartition]:
    """The partitions of a read: each split (in key order) intersected with the pushed key ranges (None: all
    of it), empty ones dropped, then adjacent ones merged until there are at most ``max_count``."""
    groups: list[list[KeyRange]] = []
    for split in splits:
        if key_ranges is None:
            groups.append([split])
            continue
        parts = [part for wanted in key_ranges if (part := intersect(split, wanted)) is not None]
        if parts:
            groups.append(parts)
    if len(groups) > max_count:  # merge runs of adjacent groups, as evenly as the count allows
        merged: list[list[KeyRange]] = []
        for i in range(max_count):
            lo, hi = i * len(groups) // max_count, (i + 1) * len(groups) // max_count
            merged.append([r for group in groups[lo:hi] for r in group])
        groups = merged
    return [KeyRangePartition(i, group) for i, group in enumerate(groups)]


def describe_table(options: SourceOptions) -> TableSchema:
    """The table's schema (DescribeTable)."""
    client = options.settings.table_client()
    try:
        return client.describe_table(options.table).schema
    finally:
        client.close()


class TablestoreReader(DataSourceReader):
    """Read one table (``options.table``) into ``schema``; picklable, it holds no client or connection."""

    def __init__(self, options: SourceOptions, schema: StructType,
                 primary_key: Sequence[PrimaryKeyColumn] | None = None,
                 table_max_versions: int | None = None) -> None:
        self.options = options
        self.schema = schema
        if primary_key is None:
            table = describe_table(options)
            primary_key, table_max_versions = table.primary_key, table.options.max_versions
        self.primary_key = tuple(primary_key)
        self.fields = read_fields(schema, self.primary_key, options)
        self.arrow_schema = arrow_schema(schema)
        self.key_ranges: list[KeyRange] | None = None
        self.column_filter: ColumnCondition | None = None
        self.pushed: list[str] = []
        self.hide_tombstones = bool(options.fence_column) and not options.show_replication_columns
        wanted = [f.name for f in self.fields if f.source in (CELL, VERSIONS)]
        self.hidden_fence: str | None = None  # read to recognise tombstones; not in the output
        if self.hide_tombstones and options.fence_column not in wanted:
            self.hidden_fence = options.fence_column
        hidden = (self.hidden_fence,) if self.hidden_fence else ()
        if options.time_range is None:
            # a key column among the columns makes GetRange return rows that hold none of the others
            self.columns_to_get: tuple[str, ...] = (self.primary_key[0].name, *wanted, *hidden)
        else:
            # with a time range, only rows with a cell of a read column in the range: no key column (the
            # server leaves the other rows out) and RowsToArrow.page(drop_empty) drops rows of the hidden fence alone;
            # a schema of key columns only reads all columns (rows with any cell in the range)
            self.columns_to_get = (*wanted, *hidden) if wanted else ()
        versioned = any(f.source == VERSIONS for f in self.fields)
        if not versioned:
            self.max_versions = 1
        elif options.max_versions is not None:
            self.max_versions = options.max_versions
        else:  # a versioned user schema without the option: every version the table keeps
            if table_max_versions is None:
                table_max_versions = describe_table(options).options.max_versions
            self.max_versions = table_max_versions

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(table={self.options.table!r}, endpoint={self.options.endpoint!r}, "
                f"pushed={self.pushed!r})")

    def partitions(self) -> list[InputPartition]:
        """One partition per ComputeSplitPointsBySize range (at most ``max_split_count``), narrowed by pushed
        key ranges; none when the pushed key ranges are empty."""
        if self.key_ranges is not None and not self.key_ranges:
            return [KeyRangePartition(0, [])]
        client = self.options.settings.table_client()
        try:
            splits = client.compute_split_points_by_size(self.options.table, self.options.split_size_mb * MB)
        finally:
            client.close()
        partitions = split_partitions(splits.ranges(), self.key_ranges, self.options.max_split_count)
        return list(partitions) or [KeyRangePartition(0, [])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of ``partition``'s ranges, one record batch per GetRange page (tombstones skipped)."""
        ranges: Sequence[KeyRange] = getattr(partition, "ranges", ())
        if not ranges:
            return
        converter = RowsToArrow(self.fields, self.arrow_schema, failfast=self.options.mode == "FAILFAST",
                                spark_types=[f.dataType.simpleString() for f in self.schema.fields])
        client = self.options.settings.table_client()
        try:
            for start, end in ranges:
                cursor: Any = start
                while cursor is not None:
                    rows, cursor = client.get_range(
                        self.options.table, cursor, end, limit=self.options.page_rows,
                        columns=self.columns_to_get, max_versions=self.max_versions,
                        time_range=self.options.time_range, column_filter=self.column_filter)
                    # straight from the page's bytes where the compiled module is in use
                    batch = converter.page(
                        rows, tombstone_fence=self.options.fence_column if self.hide_tombstones else None,
                        drop_empty=self.options.time_range is not None, ignored=self.hidden_fence)
                    if batch.num_rows:
                        yield batch
        finally:
            client.close()


class TablestorePushdownReader(TablestoreReader):
    """A :class:`TablestoreReader` that takes Spark's filters: key ranges and a column filter the server
    applies (:mod:`~airflow_tablestore.spark.datasource.pushdown`); it returns the filters Spark must still
    apply."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (PySpark's name)
        plan = plan_pushdown(filters, self.primary_key, self.fields)
        self.key_ranges = plan.ranges
        self.column_filter = plan.column_filter
        self.pushed = plan.pushed
        yield from plan.remaining
