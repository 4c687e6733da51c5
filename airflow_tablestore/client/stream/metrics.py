"""Thread-safe counters of a stream worker."""

from __future__ import annotations

import threading
from typing import NamedTuple


class StreamMetricsSnapshot(NamedTuple):
    leases_owned: int
    records: int
    batches: int
    checkpoints: int
    shards_finished: int
    leases_taken: int
    leases_stolen: int
    leases_lost: int
    processor_errors: int
    trimmed_restarts: int
    coordinator_errors: int


class StreamWorkerMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(StreamMetricsSnapshot._fields, 0)

    def add(self, name: str, value: int = 1) -> None:
        with self._lock:
            self._counts[name] += value

    def set(self, name: str, value: int) -> None:
        with self._lock:
            self._counts[name] = value

    def snapshot(self) -> StreamMetricsSnapshot:
        with self._lock:
            return StreamMetricsSnapshot(**self._counts)
