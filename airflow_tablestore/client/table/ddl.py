"""Pieces of the table API's DDL answers: ``update_table``'s result and ``compute_split_points_by_size``'s
units and split points (checked as the Java SDK checks them).

:class:`~airflow_tablestore.client.table.client.TableClient` owns the operations; request and answer
conversions of schemas and options are in :mod:`~airflow_tablestore.client.table.schema`.
"""

from __future__ import annotations

import logging
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
    TableOptions,
)
from airflow_tablestore.client.plainbuffer.decode import decode_row
from airflow_tablestore.client.table.schema import (
    primary_key_from_pb,
)
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
