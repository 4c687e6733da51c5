"""Test helpers: replay tunnel records onto a table, snapshot a table with all versions, track order."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from replication_helpers import apply_records

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    MAX_TIME_DEVIATION,
    PrimaryKey,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    StreamSpec,
    TableOptions,
    TableSchema,
)
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.processor import ChannelContext, ChannelProcessor

PK_SCHEMA = (PrimaryKeyColumn("pk", PrimaryKeyType.STRING), PrimaryKeyColumn("n", PrimaryKeyType.INTEGER))


def table_schema(name: str, *, stream: bool = True) -> TableSchema:
    """Two-column key, 5 versions, any cell version accepted (replicas keep the original timestamps)."""
    return TableSchema(
        name=name,
        primary_key=PK_SCHEMA,
        options=TableOptions(max_versions=5, max_time_deviation=MAX_TIME_DEVIATION),
        stream=StreamSpec(enabled=True, expiration_hours=24) if stream else None,
    )


def full_scan(table_client: Any, table: str) -> list[tuple[PrimaryKey, list[tuple[Any, ...]]]]:
    """Every row with every version, as comparable plain tuples."""
    start = tuple((c.name, INF_MIN) for c in PK_SCHEMA)
    end = tuple((c.name, INF_MAX) for c in PK_SCHEMA)
    rows = table_client.iter_range(table, start, end, max_versions=5)
    return [
        (row.primary_key, sorted((c.name, c.timestamp, repr(c.value)) for c in row.columns))
        for row in rows
    ]


class RecordingProcessor(ChannelProcessor):
    """Collects batches (thread-safe), optionally applying them to a replica table; can fail on demand."""

    def __init__(self, table_client: Any = None, replica: str | None = None) -> None:
        self.table_client = table_client
        self.replica = replica
        self.lock = threading.Lock()
        self.batches: list[tuple[str, list[Record]]] = []
        self.fail_when: Any = None  # callable(records, context) -> bool
        self.failures = 0
        self.fail_with: Exception = RuntimeError("injected processor failure")

    def process(self, records: list[Record], context: ChannelContext) -> None:
        if self.fail_when is not None and self.fail_when(records, context):
            with self.lock:
                self.failures += 1
            raise self.fail_with
        if self.table_client is not None and self.replica is not None:
            apply_records(self.table_client, self.replica, records)
        with self.lock:
            self.batches.append((context.channel_id, list(records)))

    @property
    def records(self) -> list[Record]:
        with self.lock:
            return [r for _, batch in self.batches for r in batch]

    def per_key_sequences(self) -> dict[PrimaryKey, list[tuple[int, int, int]]]:
        """Stream sequence positions in delivery order, per primary key."""
        out: dict[PrimaryKey, list[tuple[int, int, int]]] = defaultdict(list)
        for rec in self.records:
            if rec.sequence is not None:
                out[rec.primary_key].append(tuple(rec.sequence))  # type: ignore[arg-type]
        return out


EMULATOR_ARGS = ["--base-channel-rows", "40", "--max-read-records", "25", "--stream-partitions", "2",
                 "--log-level", "WARNING"]
"""Small channels and short reads (a test module may set its own ``EMULATOR_ARGS``)."""


def fast_config(**overrides: Any) -> TunnelWorkerConfig:
    """Short intervals so tests finish in seconds against the emulator."""
    settings: dict[str, Any] = {
        "heartbeat_interval_s": 0.3,
        "heartbeat_timeout_s": 3.0,
        "checkpoint_interval_s": 0.2,
        "reconnect_backoff_s": (0.05, 0.3),
        "allow_short_intervals": True,
        "client_tag": "test",
    }
    settings.update(overrides)
    return TunnelWorkerConfig(**settings)
