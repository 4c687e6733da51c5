"""Table schema, options, reserved throughput and stream settings ↔ their protobuf messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError, TablestoreClientError
from airflow_tablestore.client.model import (
    ColumnType,
    DefinedColumn,
    PrimaryKey,
    PrimaryKeyColumn,
    PrimaryKeyType,
    ReservedThroughput,
    StreamDetails,
    StreamSpec,
    TableDescription,
    TableOptions,
    TableSchema,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

_PK_TYPES = {
    PrimaryKeyType.INTEGER: 1,
    PrimaryKeyType.STRING: 2,
    PrimaryKeyType.BINARY: 3,
}
_PK_TYPES_BACK = {number: kind for kind, number in _PK_TYPES.items()}
_COLUMN_TYPES = {
    ColumnType.INTEGER: 1,
    ColumnType.DOUBLE: 2,
    ColumnType.BOOLEAN: 3,
    ColumnType.STRING: 4,
    ColumnType.BINARY: 7,
}
_COLUMN_TYPES_BACK = {number: kind for kind, number in _COLUMN_TYPES.items()}


def _require_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise TablestoreClientError(f"{kind} must be a non-empty string, got {name!r}")
    return name


def options_to_pb(options: TableOptions) -> Any:
    """``TableOptions`` with all four fields set."""
    return table_pb2.TableOptions(
        time_to_live=options.time_to_live,
        max_versions=options.max_versions,
        deviation_cell_version_in_sec=options.max_time_deviation,
        allow_update=options.allow_update,
    )


_OPTION_FIELDS = {
    "time_to_live": "time_to_live",
    "max_versions": "max_versions",
    "max_time_deviation": "deviation_cell_version_in_sec",
    "allow_update": "allow_update",
}


def partial_options_to_pb(changes: Mapping[str, Any]) -> Any:
    """``TableOptions`` carrying only the fields in ``changes`` (UpdateTable merges them server-side)."""
    unknown = sorted(set(changes) - set(_OPTION_FIELDS))
    if unknown:
        raise TablestoreClientError(
            f"unknown table option(s) {', '.join(unknown)}; valid: {', '.join(sorted(_OPTION_FIELDS))}"
        )
    if not changes:
        raise TablestoreClientError("no table option to change")
    return table_pb2.TableOptions(**{_OPTION_FIELDS[name]: value for name, value in changes.items()})


def options_from_pb(message: Any) -> TableOptions:
    default = TableOptions()
    return TableOptions(
        time_to_live=message.time_to_live if message.HasField("time_to_live") else default.time_to_live,
        max_versions=message.max_versions if message.HasField("max_versions") else default.max_versions,
        max_time_deviation=(
            message.deviation_cell_version_in_sec
            if message.HasField("deviation_cell_version_in_sec") else default.max_time_deviation
        ),
        allow_update=message.allow_update if message.HasField("allow_update") else default.allow_update,
    )


def reserved_throughput_to_pb(throughput: ReservedThroughput) -> Any:
    return table_pb2.ReservedThroughput(
        capacity_unit=table_pb2.CapacityUnit(read=throughput.read, write=throughput.write)
    )


def stream_spec_to_pb(stream: StreamSpec) -> Any:
    message = table_pb2.StreamSpecification(enable_stream=stream.enabled)
    if stream.enabled:
        message.expiration_time = stream.expiration_hours
        message.columns_to_get.extend(stream.columns_to_get)
    return message


def stream_details_from_pb(message: Any | None) -> StreamDetails:
    if message is None or not message.enable_stream:
        return StreamDetails(enabled=False)
    return StreamDetails(
        enabled=True,
        stream_id=message.stream_id if message.HasField("stream_id") else None,
        expiration_hours=message.expiration_time if message.HasField("expiration_time") else None,
        last_enable_time=message.last_enable_time if message.HasField("last_enable_time") else None,
    )


def create_table_request(schema: TableSchema) -> Any:
    """The ``CreateTableRequest`` for ``schema`` (options and reserved throughput always sent)."""
    _require_name("table name", schema.name)
    if not schema.primary_key:
        raise TablestoreClientError(
            f"table {schema.name!r}: the schema needs at least one primary-key column"
        )
    meta = table_pb2.TableMeta(table_name=schema.name)
    for column in schema.primary_key:
        if not isinstance(column, PrimaryKeyColumn):
            raise TablestoreClientError(f"primary key entries must be PrimaryKeyColumn, got {column!r}")
        item = meta.primary_key.add(name=_require_name("primary-key column name", column.name),
                                    type=_PK_TYPES[PrimaryKeyType(column.type)])
        if column.auto_increment:
            item.option = 1
    for defined in schema.defined_columns:
        meta.defined_column.add(name=_require_name("defined column name", defined.name),
                                type=_COLUMN_TYPES[ColumnType(defined.type)])
    request = table_pb2.CreateTableRequest(
        table_meta=meta,
        reserved_throughput=reserved_throughput_to_pb(schema.reserved_throughput),
        table_options=options_to_pb(schema.options),
    )
    if schema.stream is not None:
        request.stream_spec.CopyFrom(stream_spec_to_pb(schema.stream))
    return request


def _shard_split(data: bytes) -> PrimaryKey | None:
    try:
        row = decode_row(data)
    except PlainBufferError:
        return None
    return row.primary_key if row is not None else None


def primary_key_from_pb(items: Any) -> tuple[PrimaryKeyColumn, ...]:
    """Repeated ``PrimaryKeySchema`` as :class:`PrimaryKeyColumn` values, in schema order."""
    return tuple(
        PrimaryKeyColumn(
            name=item.name,
            type=_PK_TYPES_BACK.get(item.type, PrimaryKeyType.STRING),
            auto_increment=item.HasField("option") and item.option == 1,
        )
        for item in items
    )


def description_from_pb(message: Any) -> TableDescription:
    """A ``DescribeTableResponse`` as a :class:`TableDescription`."""
    meta = message.table_meta
    primary_key = primary_key_from_pb(meta.primary_key)
    defined = tuple(
        DefinedColumn(item.name, _COLUMN_TYPES_BACK.get(item.type, ColumnType.STRING))
        for item in meta.defined_column
    )
    capacity = message.reserved_throughput_details.capacity_unit
    stream = stream_details_from_pb(message.stream_details if message.HasField("stream_details") else None)
    spec = (
        StreamSpec(enabled=True, expiration_hours=stream.expiration_hours or 168) if stream.enabled else None
    )
    schema = TableSchema(
        name=meta.table_name,
        primary_key=primary_key,
        defined_columns=defined,
        options=options_from_pb(message.table_options),
        reserved_throughput=ReservedThroughput(read=capacity.read, write=capacity.write),
        stream=spec,
    )
    splits = tuple(
        split for split in (_shard_split(raw) for raw in message.shard_splits) if split is not None
    )
    return TableDescription(schema=schema, stream=stream, shard_splits=splits)
