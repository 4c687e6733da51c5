"""``TunnelWorkerConfig``: every knob of the tunnel worker, with the official SDKs' defaults."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from airflow_tablestore.client.backoff import EMPTY_READ, Backoff

MIN_HEARTBEAT_INTERVAL_S = 5.0


@dataclass(frozen=True)
class TunnelWorkerConfig:
    """Tunnel worker settings.

    * ``heartbeat_interval_s`` (≥ 5 s unless ``allow_short_intervals``): how often channels are synchronised.
    * ``heartbeat_timeout_s`` (> interval): sent to the server at connect; also the local watchdog — with no
      successful heartbeat for that long the session is considered lost and the worker reconnects.
    * ``checkpoint_interval_s``: the latest processed token is checkpointed at most this often (and always on
      channel close and at "finished").
    * ``max_channel_parallel``: the process pool's size: at most this many channels run ``process()`` at once.
    * ``read_threads``: the read pool's size: at most this many ReadRecords calls in flight at once.
    * ``max_buffered_answers``: at most this many ReadRecords answers held at once across all channels (being
      read, waiting or being processed; an answer is at most a few MB).
    * ``read_ahead``: ReadRecords answers one channel may read ahead while its previous batch is processed;
      0 reads the next answer only once the previous one is processed.
    * ``empty_read_backoff``: sleep between stream reads that returned "not enough" data.
    * ``reconnect_backoff_s``: random sleep range before reconnecting after losing the session.
    * ``progress_log_interval_s``: period of the INFO progress line.
    * ``allow_short_intervals``: lift the 5 s heartbeat minimum (tests against the emulator).
    """

    heartbeat_interval_s: float = 30.0
    heartbeat_timeout_s: float = 300.0
    checkpoint_interval_s: float = 10.0
    max_channel_parallel: int = 8
    read_threads: int = 8
    max_buffered_answers: int = 32
    client_tag: str = field(default_factory=socket.gethostname)
    read_ahead: int = 1
    empty_read_backoff: Backoff = EMPTY_READ
    reconnect_backoff_s: tuple[float, float] = (0.001, 10.0)
    progress_log_interval_s: float = 60.0
    allow_short_intervals: bool = False

    def __post_init__(self) -> None:
        minimum = 0.05 if self.allow_short_intervals else MIN_HEARTBEAT_INTERVAL_S
        if self.heartbeat_interval_s < minimum:
            raise ValueError(f"heartbeat_interval_s must be at least {minimum} s")
        if self.heartbeat_timeout_s <= self.heartbeat_interval_s:
            raise ValueError("heartbeat_timeout_s must be greater than heartbeat_interval_s")
        if self.checkpoint_interval_s < 0:
            raise ValueError("checkpoint_interval_s must be >= 0")
        for name in ("max_channel_parallel", "read_threads", "max_buffered_answers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1 (a pool's bound), got {value!r}")
        if self.read_ahead < 0:
            raise ValueError("read_ahead must be >= 0")
        low, high = self.reconnect_backoff_s
        if low < 0 or high < low:
            raise ValueError("reconnect_backoff_s must be (low, high) with 0 <= low <= high")
        if self.progress_log_interval_s <= 0:
            raise ValueError("progress_log_interval_s must be positive")
