"""The client's public API: the names most callers need, each imported lazily from its defining module.

This is the package's one public-API module, and the only module allowed to re-export names defined elsewhere:
every other module defines what it holds, and callers import from the defining module or from here.

A pure-Python Tablestore client: the table API (``table/``), the Tunnel Service (``tunnel/``), the Stream API
(``stream/``), the PlainBuffer codec (``plainbuffer/``), the shared data model and typed errors.

Quick start::

    from airflow_tablestore.client import TableClient

    with TableClient(endpoint, access_key_id, access_key_secret, instance_name) as client:
        client.put_row("orders", [("id", 1)], {"status": "new"})
        row = client.get_row("orders", [("id", 1)])

Every name here is imported lazily on first use, so importing one submodule (``client.transport``, ...) never
runs the others: the package has no import-order dependencies. The tunnel worker's common names come from here
too (``from airflow_tablestore.client import TunnelClient, TunnelWorker, TunnelWorkerConfig,
CallbackProcessor``); the stream worker is imported from its module (``client.stream.worker``).

``_EXPORTS`` (name → defining module) is the list: ``__all__`` is derived from it, and the ``TYPE_CHECKING``
imports repeat it for type checkers (``Name as Name``: an explicit re-export); ``tests/client/test_public_api.py``
checks the three agree.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablestore.client.auth import Credentials as Credentials
    from airflow_tablestore.client.errors import AlreadyExistsError as AlreadyExistsError
    from airflow_tablestore.client.errors import AuthError as AuthError
    from airflow_tablestore.client.errors import BatchWriteError as BatchWriteError
    from airflow_tablestore.client.errors import ConditionFailedError as ConditionFailedError
    from airflow_tablestore.client.errors import InvalidParameterError as InvalidParameterError
    from airflow_tablestore.client.errors import NotFoundError as NotFoundError
    from airflow_tablestore.client.errors import PlainBufferError as PlainBufferError
    from airflow_tablestore.client.errors import ServerError as ServerError
    from airflow_tablestore.client.errors import StreamNotEnabledError as StreamNotEnabledError
    from airflow_tablestore.client.errors import TablestoreClientError as TablestoreClientError
    from airflow_tablestore.client.errors import TablestoreError as TablestoreError
    from airflow_tablestore.client.errors import TablestoreNetworkError as TablestoreNetworkError
    from airflow_tablestore.client.errors import TablestoreServiceError as TablestoreServiceError
    from airflow_tablestore.client.errors import ThrottledError as ThrottledError
    from airflow_tablestore.client.model import AUTO_INCREMENT as AUTO_INCREMENT
    from airflow_tablestore.client.model import INF_MAX as INF_MAX
    from airflow_tablestore.client.model import INF_MIN as INF_MIN
    from airflow_tablestore.client.model import CellOp as CellOp
    from airflow_tablestore.client.model import Column as Column
    from airflow_tablestore.client.model import ColumnType as ColumnType
    from airflow_tablestore.client.model import Comparator as Comparator
    from airflow_tablestore.client.model import CompositeColumnCondition as CompositeColumnCondition
    from airflow_tablestore.client.model import Condition as Condition
    from airflow_tablestore.client.model import DefinedColumn as DefinedColumn
    from airflow_tablestore.client.model import Direction as Direction
    from airflow_tablestore.client.model import LogicalOperator as LogicalOperator
    from airflow_tablestore.client.model import PrimaryKeyColumn as PrimaryKeyColumn
    from airflow_tablestore.client.model import PrimaryKeyType as PrimaryKeyType
    from airflow_tablestore.client.model import ReservedThroughput as ReservedThroughput
    from airflow_tablestore.client.model import Row as Row
    from airflow_tablestore.client.model import RowExistence as RowExistence
    from airflow_tablestore.client.model import RowWrite as RowWrite
    from airflow_tablestore.client.model import RowWriteResult as RowWriteResult
    from airflow_tablestore.client.model import SingleColumnCondition as SingleColumnCondition
    from airflow_tablestore.client.model import SplitLocation as SplitLocation
    from airflow_tablestore.client.model import SplitPoints as SplitPoints
    from airflow_tablestore.client.model import StreamSpec as StreamSpec
    from airflow_tablestore.client.model import TableDescription as TableDescription
    from airflow_tablestore.client.model import TableOptions as TableOptions
    from airflow_tablestore.client.model import TableSchema as TableSchema
    from airflow_tablestore.client.model import TimeRange as TimeRange
    from airflow_tablestore.client.model import WriteType as WriteType
    from airflow_tablestore.client.retry import RetryPolicy as RetryPolicy
    from airflow_tablestore.client.stream.client import StreamClient as StreamClient
    from airflow_tablestore.client.table.client import TableClient as TableClient
    from airflow_tablestore.client.table.ddl import UpdateTableResult as UpdateTableResult
    from airflow_tablestore.client.table.rows import RowReadResult as RowReadResult
    from airflow_tablestore.client.transport import Transport as Transport
    from airflow_tablestore.client.tunnel.client import TunnelClient as TunnelClient
    from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig as TunnelWorkerConfig
    from airflow_tablestore.client.tunnel.processor import CallbackProcessor as CallbackProcessor
    from airflow_tablestore.client.tunnel.processor import ChannelContext as ChannelContext
    from airflow_tablestore.client.tunnel.processor import ChannelProcessor as ChannelProcessor
    from airflow_tablestore.client.tunnel.worker import TunnelWorker as TunnelWorker

_EXPORTS: dict[str, str] = {
    "AUTO_INCREMENT": "airflow_tablestore.client.model",
    "AlreadyExistsError": "airflow_tablestore.client.errors",
    "AuthError": "airflow_tablestore.client.errors",
    "CallbackProcessor": "airflow_tablestore.client.tunnel.processor",
    "ChannelContext": "airflow_tablestore.client.tunnel.processor",
    "ChannelProcessor": "airflow_tablestore.client.tunnel.processor",
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
    "StreamNotEnabledError": "airflow_tablestore.client.errors",
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
    "TunnelWorker": "airflow_tablestore.client.tunnel.worker",
    "TunnelWorkerConfig": "airflow_tablestore.client.tunnel.config",
    "UpdateTableResult": "airflow_tablestore.client.table.ddl",
    "WriteType": "airflow_tablestore.client.model",
}

__all__ = list(_EXPORTS)


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
