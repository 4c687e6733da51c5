"""What a streaming query's rows look like: the change log (by default) or flat typed columns plus the action.

Without a user schema a change is one row of the change-log schema the Parquet sink writes
(:data:`~airflow_tablestore.spark.changes.CHANGE_SCHEMA`: channel, chunk and index, action, primary key, columns
with op and timestamp, sequence). With a user schema each column is a primary-key or attribute column of the
table (its newest PUT value in the change; null when the change deletes it or lacks it), plus ``_action``
(``PUT_ROW``, ``UPDATE_ROW`` or ``DELETE_ROW``) when the schema has it. Both are built straight from the
records' PlainBuffer bytes when they come encoded (:attr:`ChangeOutput.takes_encoded`: the compiled modules in
use); anything that path leaves out is decoded and built as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructType

from airflow_tablestore.client.model import CellOp, Record, Row
from airflow_tablestore.client.records import EncodedRecords
from airflow_tablestore.spark.arrow import RowsToArrow
from airflow_tablestore.spark.changes import CHANGE_SCHEMA, encoded_records_to_arrow, records_to_arrow
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

    @property
    def takes_encoded(self) -> bool:
        """Whether :meth:`batches` builds its batches straight from encoded records (the change-log schema, or
        a user schema the compiled flat builder takes)."""
        return self.flat is None or self.flat.takes_changes

    def batches(self, records: Sequence[Record] | EncodedRecords, channel_id: str, chunk: str,
                first_index: int) -> Iterator[pa.RecordBatch]:
        if self.flat is None:
            table = (encoded_records_to_arrow(records, channel_id, chunk, first_index)
                     if isinstance(records, EncodedRecords) else records_to_arrow(records, channel_id, chunk,
                                                                                  first_index))
            yield from table.cast(self.schema).to_batches()
            return
        with_action = self.action_index is not None
        if isinstance(records, EncodedRecords):
            straight = self.flat.changes_encoded(records, with_action=with_action)
            if straight is not None:
                yield self._with_action(*straight)
                return
            records = records.decode()
        # newest version first per column, as RowsToArrow expects of a row
        rows = [Row(r.primary_key, tuple(sorted((c for c in r.columns if c.op == CellOp.PUT),
                                                key=lambda c: -(c.timestamp or 0))))
                for r in records]
        actions = pa.array([r.action.name for r in records], pa.string()) if with_action else None
        yield self._with_action(self.flat.batch(rows), actions)

    def _with_action(self, batch: pa.RecordBatch, actions: pa.Array | None) -> pa.RecordBatch:
        arrays = list(batch.columns)
        if self.action_index is not None:
            arrays.insert(self.action_index, actions)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
