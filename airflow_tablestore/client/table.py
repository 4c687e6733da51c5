"""``TableClient``: the Tablestore table-API client, composed of the DDL and the row operations.

The operations live in two mixins, one job each: :class:`~airflow_tablestore.client.table_ddl.TableDdlMixin`
(create/describe/list/update/delete tables) and :class:`~airflow_tablestore.client.table_rows.TableRowsMixin`
(single-row and batch reads/writes, range scans). This module puts them on one transport and is the import
path for ``TableClient``, ``RowReadResult`` and ``UpdateTableResult``.

Rows use the shared model of :mod:`airflow_tablestore.client.model`: a primary key is a sequence of
``(name, value)`` pairs in schema order; attribute values map by Python type (``bytes`` is BINARY).
Service errors surface as the typed exceptions of :mod:`airflow_tablestore.client.errors`.

Reads are retried on server errors; writes only on throttling (see :class:`RetryPolicy`). ``write_rows``
chunks any number of writes into legal batches and never drops a row silently.
"""

from __future__ import annotations

from typing import Any

from airflow_tablestore.client.arguments import normalize_columns, normalize_primary_key
from airflow_tablestore.client.base_client import BaseClient
from airflow_tablestore.client.batch_write import MAX_BATCH_WRITE_BYTES, MAX_BATCH_WRITE_ROWS
from airflow_tablestore.client.table_ddl import TableDdlMixin, UpdateTableResult
from airflow_tablestore.client.table_rows import MAX_BATCH_GET_ROWS, RowReadResult, TableRowsMixin


class TableClient(TableDdlMixin, TableRowsMixin, BaseClient):
    """Client of one Tablestore instance's table API.

    Build it from the endpoint and AccessKey (``region`` switches to V4 signing, ``sts_token`` adds an STS
    token), or from an existing :class:`Transport`. Use as a context manager or call :meth:`close`.
    """

    def __repr__(self) -> str:
        return f"TableClient(endpoint={self._transport.endpoint!r}, instance_name={self._transport.instance_name!r})"

    def _call(self, api: str, request: Any, response_cls: Any, *, idempotent: bool) -> Any:
        return self._transport.call(f"/{api}", request, response_cls, idempotent=idempotent)


__all__ = [
    "MAX_BATCH_GET_ROWS",
    "MAX_BATCH_WRITE_BYTES",
    "MAX_BATCH_WRITE_ROWS",
    "RowReadResult",
    "TableClient",
    "UpdateTableResult",
    "normalize_columns",
    "normalize_primary_key",
]
