"""``TablestoreDataSource``: the ``tablestore`` format's entry point, which Spark asks for schemas, readers and writers.

It sits above the two products it hands out, so neither imports the other's way: batch reads and writes from
:mod:`.datasource`, the stream reader from :mod:`.stream` (which builds on the data source's options and schema).

Spark finds it without registration through the top-level module ``pyspark_tablestore`` (its ``DefaultSource``),
which the package installs: PySpark looks up every importable ``pyspark_*`` module with a ``DefaultSource``.
Where that lookup cannot see the package (an editable install), one line registers it:
``spark.dataSource.register(TablestoreDataSource)``.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions

PUSHDOWN_WORKER = "data_source_pushdown_filters.py"
"""PySpark's worker that calls ``pushFilters`` (only when ``spark.sql.python.filterPushdown.enabled``)."""


def asked_to_push_filters() -> bool:
    """Whether Spark's filter-pushdown worker is the caller (it is on the stack).

    PySpark refuses to plan a read whose reader implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, its default; the conf is not visible in the worker.
    Only the pushdown worker calls ``pushFilters``, so only it gets the reader that has it, and a plain
    ``spark.read`` works with the default conf. Should a PySpark release rename the worker, the data source
    merely stops pushing filters: results stay the same.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(PUSHDOWN_WORKER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class TablestoreDataSource(DataSource):
    """Read a Tablestore table into a DataFrame, write a DataFrame into one, or stream a table's changes through
    a tunnel (format ``tablestore``)."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return "tablestore"

    def schema(self) -> StructType:
        """The table's primary key and defined columns (DescribeTable); with ``tunnel`` (streaming), the change
        log. Unless the user gives a schema."""
        if self.parsed.tunnel:
            from airflow_tablestore.spark.stream.output import change_log_schema

            return change_log_schema()
        from airflow_tablestore.spark.datasource.schema import table_schema

        return table_schema(self.parsed)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader; one that takes filters (``pushFilters``) only when Spark's filter-pushdown step asks
        and the ``pushdown`` option is on (see :func:`asked_to_push_filters`)."""
        from airflow_tablestore.spark.datasource.reader import TablestorePushdownReader, TablestoreReader

        if self.parsed.tunnel:
            raise OptionError("option 'tunnel' reads a table's changes, which is a stream: use spark.readStream "
                              "(or drop the option to read the table's rows with spark.read)")
        if self.parsed.pushdown and asked_to_push_filters():
            return TablestorePushdownReader(self.parsed, schema)
        return TablestoreReader(self.parsed, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from airflow_tablestore.spark.datasource.writer import TablestoreWriter

        return TablestoreWriter(self.parsed, schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The table's changes through the tunnel named by option ``tunnel``: base data, then the stream."""
        from airflow_tablestore.spark.stream.reader import TablestoreStreamReader

        if not self.parsed.tunnel:
            raise OptionError("option 'tunnel' is required for spark.readStream.format('tablestore'): the name of "
                              "a tunnel of the table (TablestoreCreateTunnelOperator creates one)")
        return TablestoreStreamReader(self.parsed, schema)
