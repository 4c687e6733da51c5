"""Helpers shared by the replication tests (tunnel worker, stream worker, Spark driver, end to end).

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so test modules import this as
``from replication_helpers import ...``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    MAX_TIME_DEVIATION,
    ActionType,
    PrimaryKey,
    Record,
    RowWrite,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.verify.compare import verify_replica
from demo import replication as demo

Snapshot = dict[PrimaryKey, tuple[tuple[str, Any, int | None], ...]]


def replica_differences(source_client: Any, source: str, replica_client: Any, replica: str) -> list[str]:
    """The replica verifier's differences between ``source`` and its fenced replica, every version (empty when
    they are equal cell for cell)."""
    report = verify_replica(source_client, source, replica_client, replica, all_versions=True, max_differences=10)
    return [str(d) for d in report.differences]


def snapshot(client: Any, table: str) -> Snapshot:
    """Every row of a (source) table with every kept version, ``{pk: ((column, value, timestamp), ...)}`` sorted
    (the form :func:`spark_runs.base_rows` gives a change log's base data in)."""
    start = (("region", INF_MIN), ("id", INF_MIN))
    end = (("region", INF_MAX), ("id", INF_MAX))
    out: Snapshot = {}
    for row in client.iter_range(table, start, end, max_versions=demo.MAX_VERSIONS):
        cells = sorted(((c.name, c.value, c.timestamp) for c in row.columns),
                       key=lambda c: (c[0], c[2] or 0, repr(c[1])))
        out[row.primary_key] = tuple(cells)
    return out


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
