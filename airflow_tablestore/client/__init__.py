"""The client's public API: the names most callers need, each imported lazily from its defining module.

A pure-Python Tablestore client: the table API (``table/``), the Tunnel Service (``tunnel/``), the Stream API
(``stream/``), the PlainBuffer codec (``plainbuffer/``), the shared data model and typed errors.

Quick start::

    from airflow_tablestore.client import TableClient

    with TableClient(endpoint, access_key_id, access_key_secret, instance_name) as client:
        client.put_row("orders", [("id", 1)], {"status": "new"})
        row = client.get_row("orders", [("id", 1)])

Every name here is imported lazily on first use, so importing one submodule (``client.transport``, ...) never
runs the others: the package has no import-order dependencies. The tunnel and stream workers are imported from
their modules (``client.tunnel.worker``, ``client.stream.worker``).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablestore.client.auth import (
        Credentials,
    )
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
        SplitLocation,
        SplitPoints,
        StreamSpec,
        TableDescription,
        TableOptions,
        TableSchema,
        TimeRange,
        WriteType,
    )
    from airflow_tablestore.client.retry import (
        RetryPolicy,
    )
    from airflow_tablestore.client.stream.client import (
        StreamClient,
    )
    from airflow_tablestore.client.table.client import (
        TableClient,
    )
    from airflow_tablestore.client.table.ddl import (
        UpdateTableResult,
    )
    from airflow_tablestore.client.table.rows import (
        RowReadResult,
    )
    from airflow_tablestore.client.transport import (
        Transport,
    )
    from airflow_tablestore.client.tunnel.client import (
        TunnelClient,
    )

_EXPORTS: dict[str, str] = {
    "AUTO_INCREMENT": "airflow_tablestore.client.model",
    "AlreadyExistsError": "airflow_tablestore.client.errors",
    "AuthError": "airflow_tablestore.client.errors",
    "BatchWriteError": "airflow_tablestore.client.errors",
    "CellOp": "airflow_tablestore.client.model",
    "Column": "airflow_tablestore.client.model",
    "ColumnType": "airflow_tablestore.client.model",
    "Comparator": "airflow_tablestore.client.model",
    "CompositeColumnCondition": "airflow_tablestore.client.model",
    "Condition": "airflow_tablestore.client.model",
    "ConditionFailedError": "airflow_tablestore.client.errors",
    "Credentials": "airflow_tablestore.client.auth",
    "DefinedColumn": "airflow_tablestore.client.model",
    "Direction": "airflow_tablestore.client.model",
    "INF_MAX": "airflow_tablestore.client.model",
    "INF_MIN": "airflow_tablestore.client.model",
    "InvalidParameterError": "airflow_tablestore.client.errors",
    "LogicalOperator": "airflow_tablestore.client.model",
    "NotFoundError": "airflow_tablestore.client.errors",
    "PlainBufferError": "airflow_tablestore.client.errors",
    "PrimaryKeyColumn": "airflow_tablestore.client.model",
    "PrimaryKeyType": "airflow_tablestore.client.model",
    "ReservedThroughput": "airflow_tablestore.client.model",
    "RetryPolicy": "airflow_tablestore.client.retry",
    "Row": "airflow_tablestore.client.model",
    "RowExistence": "airflow_tablestore.client.model",
    "RowReadResult": "airflow_tablestore.client.table.rows",
    "RowWrite": "airflow_tablestore.client.model",
    "RowWriteResult": "airflow_tablestore.client.model",
    "ServerError": "airflow_tablestore.client.errors",
    "SingleColumnCondition": "airflow_tablestore.client.model",
    "SplitLocation": "airflow_tablestore.client.model",
    "SplitPoints": "airflow_tablestore.client.model",
    "StreamClient": "airflow_tablestore.client.stream.client",
    "StreamSpec": "airflow_tablestore.client.model",
    "TableClient": "airflow_tablestore.client.table.client",
    "TableDescription": "airflow_tablestore.client.model",
    "TableOptions": "airflow_tablestore.client.model",
    "TableSchema": "airflow_tablestore.client.model",
    "TablestoreClientError": "airflow_tablestore.client.errors",
    "TablestoreError": "airflow_tablestore.client.errors",
    "TablestoreNetworkError": "airflow_tablestore.client.errors",
    "TablestoreServiceError": "airflow_tablestore.client.errors",
    "ThrottledError": "airflow_tablestore.client.errors",
    "TimeRange": "airflow_tablestore.client.model",
    "Transport": "airflow_tablestore.client.transport",
    "TunnelClient": "airflow_tablestore.client.tunnel.client",
    "UpdateTableResult": "airflow_tablestore.client.table.ddl",
    "WriteType": "airflow_tablestore.client.model",
}

__all__ = [
    "AUTO_INCREMENT",
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
    "INF_MAX",
    "INF_MIN",
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
    "SplitLocation",
    "SplitPoints",
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
    module = _EXPORTS.get(name)
    if module is None:
        # ``client.errors`` and the other submodules load on first attribute access.
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
