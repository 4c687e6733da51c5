"""Pieces shared by the benchmark scripts: the standard benchmark table, a thread-safe record counter with the
no-op tunnel processor built on it, and access to the emulator tests' raw-HTTP helpers."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from airflow_tablestore.client.model import (
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    RowWrite,
    StreamSpec,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.processor import ChannelContext, ChannelProcessor

ROOT = Path(__file__).resolve().parent.parent


def load_user_rows(tables: TableClient, table: str, rows: int, *, stream: StreamSpec | None = None) -> None:
    """Create ``table`` (int key ``id``) and write ``rows`` rows of four small columns (name, score, ratio,
    active) with ``write_rows``."""
    tables.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),), stream=stream))
    tables.write_rows(
        RowWrite(table, WriteType.PUT, (("id", i),),
                 (Column("name", f"user-{i}"), Column("score", i * 7), Column("ratio", i / 3.0),
                  Column("active", i % 2 == 0)))
        for i in range(rows)
    )


class RecordCounter:
    """Counts records across threads; ``done`` is set once ``expected`` records were counted."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n
            if self.count >= self.expected:
                self.done.set()


class CountingChannelProcessor(ChannelProcessor):
    """No-op TunnelWorker processor: counts the records it is given."""

    def __init__(self, counter: RecordCounter) -> None:
        self.counter = counter

    def process(self, records: list[Record], context: ChannelContext) -> None:
        self.counter.add(len(records))


def use_emulator_test_helpers() -> None:
    """Make the emulator tests' raw-HTTP helpers (``tunnel_emu_http``, ``tunnel_emu_helpers`` in
    ``tests/emulator/tunnel``) importable; call before importing them."""
    path = str(ROOT / "tests" / "emulator" / "tunnel")
    if path not in sys.path:
        sys.path.insert(0, path)


def timed_count(label: str, fn: Callable[[], int], expected: int) -> float:
    """Seconds ``fn`` took; raises unless it reports exactly ``expected`` records/rows."""
    started = time.perf_counter()
    seen = fn()
    elapsed = time.perf_counter() - started
    if seen != expected:
        raise RuntimeError(f"{label}: {seen} records/rows, expected {expected}")
    return elapsed
