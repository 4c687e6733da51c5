"""What a streaming query's rows look like: the change log (by default) or flat typed columns plus the action.

Without a user schema a change is one row of the change-log schema the Parquet sink writes
(:data:`~airflow_tablestore.spark.arrow.changes.CHANGE_SCHEMA`: channel, chunk and index, action, primary key, columns
with op and timestamp, sequence). With a user schema each column is a primary-key or attribute column of the
table (its newest PUT value in the change; null when the change deletes it or lacks it), plus ``_action``
(``PUT_ROW``, ``UPDATE_ROW`` or ``DELETE_ROW``) when the schema has it. Both are built straight from the
records' PlainBuffer bytes where the compiled module is in use; anything that path leaves out is decoded and built
from the record objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructType

from airflow_tablestore.client.records import Records
from airflow_tablestore.spark.arrow.changes import CHANGE_SCHEMA, records_to_arrow
from airflow_tablestore.spark.arrow.values import RowsToArrow
from airflow_tablestore.spark.datasource.options import SourceOptions
from airflow_tablestore.spark.datasource.reader import describe_table
from airflow_tablestore.spark.datasource.schema import SchemaError, arrow_schema, read_fields

ACTION_COLUMN = "_action"


def change_log_schema() -> StructType:
    """The change-log schema as a Spark schema (the default schema of ``spark.readStream``)."""
    return from_arrow_schema(CHANGE_SCHEMA)


@dataclass(frozen=True)
class ChangeOutput:
    """Records → Arrow batches of the query's schema (picklable: it travels with every read task)."""

    schema: pa.Schema
    flat: RowsToArrow | None = None
    action_index: int | None = None

    @classmethod
    def for_schema(cls, options: SourceOptions, schema: StructType) -> ChangeOutput:
        if schema == change_log_schema():
            return cls(arrow_schema(schema))
        action_index = None
        fields = []
        for i, field in enumerate(schema.fields):
            if field.name == ACTION_COLUMN:
                if not isinstance(field.dataType, StringType):
                    raise SchemaError(f"column {ACTION_COLUMN!r} (the change's action) must be a string")
                action_index = i
            else:
                fields.append(field)
        table = describe_table(options)
        columns = StructType(fields)
        flat = RowsToArrow(read_fields(columns, table.primary_key, options), arrow_schema(columns),
                           failfast=options.mode == "FAILFAST")
        return cls(arrow_schema(schema), flat, action_index)

    def batches(self, records: Records, channel_id: str, chunk: str, first_index: int) -> Iterator[pa.RecordBatch]:
        if self.flat is None:
            yield from records_to_arrow(records, channel_id, chunk, first_index).cast(self.schema).to_batches()
            return
        yield self._with_action(*self.flat.changes(records, with_action=self.action_index is not None))

    def _with_action(self, batch: pa.RecordBatch, actions: pa.Array | None) -> pa.RecordBatch:
        arrays = list(batch.columns)
        if self.action_index is not None:
            arrays.insert(self.action_index, actions)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
