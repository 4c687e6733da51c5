"""Pure-Python Tablestore client: table API, Tunnel Service, shared data model and typed errors.

Quick start::

    from airflow_tablestore.client import TableClient

    with TableClient(endpoint, access_key_id, access_key_secret, instance_name) as client:
        client.put_row("orders", [("id", 1)], {"status": "new"})
        row = client.get_row("orders", [("id", 1)])

``TunnelClient`` and ``StreamClient`` are imported lazily (``from airflow_tablestore.client import TunnelClient``
works).
"""

from __future__ import annotations

from typing import Any

from airflow_tablestore.client.auth import Credentials
from airflow_tablestore.client.errors import (
    AlreadyExistsError,
    AuthError,
    BatchWriteError,
    ConditionFailedError,
    InvalidParameterError,
    NotFoundError,
    PlainBufferError,
    ServerError,
    TablestoreClientError,
    TablestoreError,
    TablestoreNetworkError,
    TablestoreServiceError,
    ThrottledError,
)
from airflow_tablestore.client.model import (
    AUTO_INCREMENT,
    INF_MAX,
    INF_MIN,
    CellOp,
    Column,
    ColumnType,
    Comparator,
    CompositeColumnCondition,
    Condition,
    DefinedColumn,
    Direction,
    LogicalOperator,
    PrimaryKeyColumn,
    PrimaryKeyType,
    ReservedThroughput,
    Row,
    RowExistence,
    RowWrite,
    RowWriteResult,
    SingleColumnCondition,
    StreamSpec,
    TableDescription,
    TableOptions,
    TableSchema,
    TimeRange,
    WriteType,
)
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.table import RowReadResult, TableClient, UpdateTableResult
from airflow_tablestore.client.transport import Transport

__all__ = [
    "AUTO_INCREMENT",
    "INF_MAX",
    "INF_MIN",
    "AlreadyExistsError",
    "AuthError",
    "BatchWriteError",
    "CellOp",
    "Column",
    "ColumnType",
    "Comparator",
    "CompositeColumnCondition",
    "Condition",
    "ConditionFailedError",
    "Credentials",
    "DefinedColumn",
    "Direction",
    "InvalidParameterError",
    "LogicalOperator",
    "NotFoundError",
    "PlainBufferError",
    "PrimaryKeyColumn",
    "PrimaryKeyType",
    "ReservedThroughput",
    "RetryPolicy",
    "Row",
    "RowExistence",
    "RowReadResult",
    "RowWrite",
    "RowWriteResult",
    "ServerError",
    "SingleColumnCondition",
    "StreamClient",
    "StreamSpec",
    "TableClient",
    "TableDescription",
    "TableOptions",
    "TableSchema",
    "TablestoreClientError",
    "TablestoreError",
    "TablestoreNetworkError",
    "TablestoreServiceError",
    "ThrottledError",
    "TimeRange",
    "Transport",
    "TunnelClient",
    "UpdateTableResult",
    "WriteType",
]


def __getattr__(name: str) -> Any:
    if name == "TunnelClient":
        from airflow_tablestore.client.tunnel import TunnelClient

        return TunnelClient
    if name == "StreamClient":
        from airflow_tablestore.client.stream import StreamClient

        return StreamClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
