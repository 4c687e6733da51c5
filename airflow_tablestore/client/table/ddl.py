"""Table-API DDL: the requests that create, describe, list, update and delete tables, and split them by size.

:class:`TableDdl` sends them over the transport it is given;
:class:`~airflow_tablestore.client.table.client.TableClient` holds one and delegates its table-level methods
to it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError, TablestoreClientError
from airflow_tablestore.client.model import (
    PrimaryKey,
    PrimaryKeyColumn,
    ReservedThroughput,
    SplitLocation,
    SplitPoints,
    StreamDetails,
    StreamSpec,
    TableDescription,
    TableOptions,
    TableSchema,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.client.table.arguments import table_name
from airflow_tablestore.client.table.schema import (
    create_table_request,
    description_from_pb,
    options_from_pb,
    options_to_pb,
    partial_options_to_pb,
    primary_key_from_pb,
    reserved_throughput_to_pb,
    stream_details_from_pb,
    stream_spec_to_pb,
)
from airflow_tablestore.client.transport import Transport
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

log = logging.getLogger(__name__)

SPLIT_SIZE_UNITS = (100 * 1024 * 1024, 1024 * 1024, 1024, 1)
"""``split_size_unit_in_byte`` candidates, largest first: the service's own 100 MB unit, MiB, KiB, bytes."""


def split_size_units(split_size_bytes: int) -> tuple[int, int]:
    """``(split_size, split_size_unit_in_byte)`` for a byte size: the largest unit of :data:`SPLIT_SIZE_UNITS`
    dividing it, so the product is exact (100 MB as ``(1, 100 MiB)``, 100 KiB as ``(100, 1 KiB)``)."""
    unit = next(unit for unit in SPLIT_SIZE_UNITS if split_size_bytes % unit == 0)
    return split_size_bytes // unit, unit


@dataclass(frozen=True)
class UpdateTableResult:
    """The table's settings after an ``update_table``."""

    options: TableOptions
    reserved_throughput: ReservedThroughput
    stream: StreamDetails


class TableDdl:
    """The table-level operations of :class:`~airflow_tablestore.client.table.client.TableClient`.

    Sends each request over ``transport``, which it borrows: the client owns it and closes it.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

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
        """Split points dividing the table into ranges of about ``split_size_bytes`` each (see
        :func:`split_size_units` for the units sent); :meth:`SplitPoints.ranges` gives the ranges."""
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


def split_points_from_pb(message: Any, request_id: str | None = None) -> SplitPoints:
    """A ``ComputeSplitPointsBySizeResponse`` as :class:`SplitPoints`, checked as the Java SDK checks it."""
    primary_key = primary_key_from_pb(message.schema)
    points = tuple(_split_point(raw, primary_key, request_id) for raw in message.split_points)
    locations = tuple(SplitLocation(item.location, item.repeat) for item in message.locations)
    if sum(loc.repeat for loc in locations) != len(points) + 1 or any(loc.repeat <= 0 for loc in locations):
        raise TablestoreClientError(
            f"ComputeSplitPointsBySize: location repeats {[loc.repeat for loc in locations]} do not cover "
            f"{len(points) + 1} ranges", request_id=request_id,
        )
    return SplitPoints(primary_key=primary_key, split_points=points, locations=locations)


def _split_point(raw: bytes, primary_key: tuple[PrimaryKeyColumn, ...], request_id: str | None) -> PrimaryKey:
    try:
        row = decode_row(raw)
    except PlainBufferError as exc:
        raise PlainBufferError(f"ComputeSplitPointsBySize split point: {exc.message}",
                               request_id=request_id) from None
    names = [column.name for column in primary_key]
    point = row.primary_key if row is not None else ()
    if not point or [name for name, _ in point] != names[:len(point)]:
        raise TablestoreClientError(
            f"ComputeSplitPointsBySize: split point {point!r} is not a prefix of the primary key {names}",
            request_id=request_id,
        )
    return point
