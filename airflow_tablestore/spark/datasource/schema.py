"""Tablestore types <-> Spark types, the default schema of a table, and where each read column comes from.

The mapping is exact both ways: INTEGER <-> ``long``, DOUBLE <-> ``double``, BOOLEAN <-> ``boolean``, STRING <->
``string``, BINARY <-> ``binary``. The default schema (:func:`table_schema`) is the primary key (not nullable)
then the table's defined columns (DescribeTable), or only those named by the ``columns`` option; with
``max_versions`` > 1 every attribute column is ``array<struct<timestamp: long, value: T>>``, newest version
first (the cell versions in milliseconds, as Tablestore counts them). The fence column of a replica written by
the replication consumer (``fence_column``) is hidden unless ``show_replication_columns``.

A user schema (``.schema(...)``) may name any columns of those types, versioned columns, and a ``string``
corrupt-record column (``columnNameOfCorruptRecord``, default ``_corrupt_record``); :func:`read_fields` checks
it once, on the driver, and says where each column comes from. A versioned column read without the
``max_versions`` option holds every version the table keeps (its ``max_versions``), not one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from airflow_tablestore.client.model import ColumnType, PrimaryKeyColumn, TableSchema
from airflow_tablestore.spark.arrow.values import CELL, CORRUPT, KEY, VERSIONS, OutputField
from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions

DEFAULT_CORRUPT_RECORD_COLUMN = "_corrupt_record"
"""Spark's default ``spark.sql.columnNameOfCorruptRecord``."""

SPARK_TYPES: dict[ColumnType, DataType] = {
    ColumnType.INTEGER: LongType(),
    ColumnType.DOUBLE: DoubleType(),
    ColumnType.BOOLEAN: BooleanType(),
    ColumnType.STRING: StringType(),
    ColumnType.BINARY: BinaryType(),
}
"""Each Tablestore type's Spark type (primary-key types are INTEGER, STRING and BINARY)."""


class SchemaError(OptionError):
    """A user schema the data source cannot read into (a type with no exact Tablestore counterpart)."""


def tablestore_type(data_type: DataType) -> ColumnType | None:
    """The Tablestore type a Spark type holds exactly, or None."""
    for kind, spark_type in SPARK_TYPES.items():
        if type(data_type) is type(spark_type):
            return kind
    return None


def versions_type(kind: ColumnType) -> ArrayType:
    """``array<struct<timestamp: long, value: T>>``: every version of a column, newest first."""
    return ArrayType(StructType([StructField("timestamp", LongType(), nullable=False),
                                 StructField("value", SPARK_TYPES[kind], nullable=True)]), containsNull=False)


def versioned_value_type(data_type: DataType) -> ColumnType | None:
    """T if ``data_type`` is :func:`versions_type` (T) (field names and order as there), else None."""
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return None
    fields = data_type.elementType.fields
    if len(fields) != 2 or [f.name for f in fields] != ["timestamp", "value"]:
        return None
    if not isinstance(fields[0].dataType, LongType):
        return None
    return tablestore_type(fields[1].dataType)


def schema_of(table: TableSchema, options: SourceOptions) -> StructType:
    """The default Spark schema of ``table`` for these options (see the module docstring)."""
    fields = [StructField(pk.name, SPARK_TYPES[ColumnType(pk.type.value)], nullable=False)
              for pk in table.primary_key]
    pk_names = {pk.name for pk in table.primary_key}
    defined = {c.name: c.type for c in table.defined_columns}
    fence = options.fence_column
    if options.columns is not None:
        names = [c for c in options.columns if c not in pk_names]
        unknown = [c for c in names if c not in defined and c != fence]
        if unknown:
            raise OptionError(
                f"column(s) {', '.join(unknown)} of option 'columns' are not defined columns of table "
                f"{table.name!r}, so their types are unknown: give a schema, e.g. "
                f".schema('{', '.join(f'{c} string' for c in unknown)}, ...')")
    else:
        names = [c.name for c in table.defined_columns
                 if options.show_replication_columns or c.name != fence]
        if options.show_replication_columns and fence and fence not in names:
            names.append(fence)
    for name in names:
        kind = defined.get(name, ColumnType.STRING)  # the fence column is a string
        data_type = versions_type(kind) if (options.max_versions or 1) > 1 else SPARK_TYPES[kind]
        fields.append(StructField(name, data_type, nullable=True))
    return StructType(fields)


def table_schema(options: SourceOptions) -> StructType:
    """The default schema of the table the options name (one DescribeTable)."""
    client = options.settings.table_client()
    try:
        description = client.describe_table(options.table)
    finally:
        client.close()
    return schema_of(description.schema, options)


def read_fields(schema: StructType, primary_key: Sequence[PrimaryKeyColumn],
                options: SourceOptions) -> list[OutputField]:
    """Where each column of ``schema`` comes from; :class:`SchemaError` for a column that cannot be read."""
    keys = {pk.name: (i, ColumnType(pk.type.value)) for i, pk in enumerate(primary_key)}
    corrupt_name = options.corrupt_record_column or DEFAULT_CORRUPT_RECORD_COLUMN
    out: list[OutputField] = []
    for field in schema.fields:
        if field.name in keys:
            index, kind = keys[field.name]
            if tablestore_type(field.dataType) is not kind:
                raise SchemaError(
                    f"column {field.name!r} is primary-key column {index + 1} of table {options.table!r}, of type "
                    f"{kind.value}: its Spark type must be {SPARK_TYPES[kind].simpleString()}, not "
                    f"{field.dataType.simpleString()}")
            out.append(OutputField(field.name, KEY, kind, index))
            continue
        if field.name == corrupt_name and field.name not in keys:
            if not isinstance(field.dataType, StringType):
                raise SchemaError(f"the corrupt-record column {field.name!r} must be a string, "
                                  f"not {field.dataType.simpleString()}")
            out.append(OutputField(field.name, CORRUPT))
            continue
        if not field.nullable:
            raise SchemaError(f"column {field.name!r} must be nullable: a row may lack any attribute column")
        kind_or_none = tablestore_type(field.dataType)
        if kind_or_none is not None:
            out.append(OutputField(field.name, CELL, kind_or_none))
            continue
        kind_or_none = versioned_value_type(field.dataType)
        if kind_or_none is not None:
            out.append(OutputField(field.name, VERSIONS, kind_or_none))
            continue
        raise SchemaError(
            f"column {field.name!r} has Spark type {field.dataType.simpleString()}, which no Tablestore type "
            "matches exactly: use long, double, boolean, string or binary, or "
            "array<struct<timestamp: long, value: T>> for every version of a column")
    return out


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects the reader's record batches to have (it checks them for equality)."""
    return to_arrow_schema(schema, timezone="UTC")
