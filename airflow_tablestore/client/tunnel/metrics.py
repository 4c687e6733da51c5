"""Counters a user (or a sensor) can watch while a worker runs, and the periodic progress line."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricsSnapshot:
    """A consistent copy of the counters. ``lag_s`` = now − oldest stream position processed per channel
    (None until a stream record was processed)."""

    channels_owned: int
    records_processed: int
    bytes_read: int
    batches_processed: int
    checkpoints: int
    channel_errors: int
    reconnects: int
    lag_s: float | None


class WorkerMetrics:
    """Thread-safe counters updated by the channel consumers and the heartbeat loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.channels_owned = 0
        self.records_processed = 0
        self.bytes_read = 0
        self.batches_processed = 0
        self.checkpoints = 0
        self.channel_errors = 0
        self.reconnects = 0
        self._positions_us: dict[str, int] = {}
        self._last_log = time.monotonic()
        self._last_records = 0

    def batch(self, channel_id: str, records: int, size_bytes: int, last_sequence_us: int | None) -> None:
        with self._lock:
            self.records_processed += records
            self.bytes_read += size_bytes
            self.batches_processed += 1
            if last_sequence_us:
                self._positions_us[channel_id] = last_sequence_us

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def set_owned(self, n: int) -> None:
        with self._lock:
            self.channels_owned = n

    def forget(self, channel_id: str) -> None:
        with self._lock:
            self._positions_us.pop(channel_id, None)

    def snapshot(self) -> MetricsSnapshot:
        with self._lock:
            lag = None
            if self._positions_us:
                lag = max(0.0, time.time() - min(self._positions_us.values()) / 1e6)
            return MetricsSnapshot(self.channels_owned, self.records_processed, self.bytes_read,
                                   self.batches_processed, self.checkpoints, self.channel_errors,
                                   self.reconnects, lag)

    def maybe_log(self, interval_s: float, tunnel_id: str, *, force: bool = False) -> None:
        """Log one INFO progress line when ``interval_s`` has passed since the previous one (or ``force``)."""
        now = time.monotonic()
        if not force and now - self._last_log < interval_s:
            return
        snap = self.snapshot()
        rate = (snap.records_processed - self._last_records) / max(now - self._last_log, 1e-9)
        self._last_log, self._last_records = now, snap.records_processed
        lag = "n/a" if snap.lag_s is None else f"{snap.lag_s:.1f}s"
        log.info("tunnel %s: %d channels, %d records (%.0f/s), %.1f MB read, %d checkpoints, lag %s",
                 tunnel_id, snap.channels_owned, snap.records_processed, rate, snap.bytes_read / 1e6,
                 snap.checkpoints, lag)
