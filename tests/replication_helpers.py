"""Helpers shared by the replication tests (tunnel worker, stream worker, Spark driver, end to end).

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so test modules import this as
``from replication_helpers import ...``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

from airflow_tablestore.client.model import MAX_TIME_DEVIATION, ActionType, Record, RowWrite
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from demo import replication as demo


def apply_records(table_client: Any, table: str, records: Iterable[Record]) -> None:
    """Replay change records in order: PUT_ROW → PutRow (all versions), UPDATE_ROW → UpdateRow with each
    column's op, DELETE_ROW → DeleteRow."""
    for rec in records:
        if rec.action == ActionType.PUT_ROW:
            table_client.put_row(table, rec.primary_key, list(rec.columns))
        elif rec.action == ActionType.UPDATE_ROW:
            table_client.update_row(table, rec.primary_key, list(rec.columns))
        else:
            table_client.delete_row(table, rec.primary_key)


def make_source(table_client: TableClient, tunnel_client: TunnelClient, name: str, tunnel: str, rows: int) -> None:
    """The demo source table with ``rows`` base rows and a BASE_AND_STREAM tunnel on it."""
    demo.create_source_table(table_client, name)
    demo.load_rows(table_client, name, rows)
    tunnel_client.create_tunnel(name, tunnel)


def make_replica(table_client: TableClient, source: str, replica: str) -> None:
    """A table with the source's schema, no stream, accepting any cell timestamp (replicas keep the originals)."""
    desc = table_client.describe_table(source)
    options = dataclasses.replace(desc.schema.options, max_time_deviation=MAX_TIME_DEVIATION)
    table_client.create_table(dataclasses.replace(desc.schema, name=replica, stream=None, options=options))


def change_key(action: str, pk: Any, columns: Any) -> tuple[Any, ...]:
    return (action, pk, tuple(sorted((c.name, repr(c.value), c.timestamp, int(c.op)) for c in columns)))


def write_key(write: RowWrite) -> tuple[Any, ...]:
    """The :func:`change_key` of the stream record a write produces."""
    action = {"PUT": "PUT_ROW", "UPDATE": "UPDATE_ROW", "DELETE": "DELETE_ROW"}[write.type.value]
    return change_key(action, write.primary_key, write.columns)


def stream_changes(records: Iterable[Record]) -> Counter[tuple[Any, ...]]:
    """The stream (not base-data) records as a multiset of :func:`change_key`."""
    return Counter(change_key(r.action.name, r.primary_key, r.columns) for r in records if r.sequence is not None)
