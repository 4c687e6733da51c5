"""``StreamWorkerConfig``: every knob of the lease-based stream worker."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

from airflow_tablestore.client.backoff import PROCESSOR_RETRY

DEFAULT_STATUS_TABLE = "stream_worker_status"


def default_worker_id() -> str:
    """``host-pid-random``: unique per process, readable in the status table."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class StreamWorkerConfig:
    """Stream worker settings.

    * ``status_table``: Tablestore table holding one lease per shard (created if missing).
    * ``worker_id``: this worker's name in ``LeaseOwner``/``LeaseStealer``; must be unique among live workers.
    * ``lease_duration_s``: a lease whose ``LeaseCounter`` did not move for this long is expired and taken
      over.
    * ``renew_interval_s``: heartbeat period (renewals, lease scan, balancing); must be < lease_duration_s /
      2.
    * ``shard_sync_interval_s``: how often DescribeStream is read to create leases for new shards.
    * ``max_parallel_shards``: size of the thread pool that pulls and processes shards.
    * ``fetch_limit``: records per GetStreamRecord call.
    * ``idle_poll_s``: wait before polling a caught-up shard again.
    * ``processor_retry_s``: (base, max) back-off before a batch whose processing raised is delivered again.
    * ``progress_log_interval_s``: period of the INFO progress line.
    """

    status_table: str = DEFAULT_STATUS_TABLE
    worker_id: str = field(default_factory=default_worker_id)
    lease_duration_s: float = 30.0
    renew_interval_s: float = 10.0
    shard_sync_interval_s: float = 30.0
    max_parallel_shards: int = 8
    fetch_limit: int = 1000
    idle_poll_s: float = 0.5
    processor_retry_s: tuple[float, float] = (PROCESSOR_RETRY.base_s, PROCESSOR_RETRY.max_s)
    progress_log_interval_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.status_table or not self.worker_id:
            raise ValueError("status_table and worker_id must be non-empty")
        if self.renew_interval_s <= 0 or self.lease_duration_s < 2 * self.renew_interval_s:
            raise ValueError("need 0 < renew_interval_s <= lease_duration_s / 2")
        if self.shard_sync_interval_s <= 0 or self.idle_poll_s < 0 or self.progress_log_interval_s <= 0:
            raise ValueError("intervals must be positive")
        if self.max_parallel_shards < 1:
            raise ValueError("max_parallel_shards must be >= 1")
        if not 1 <= self.fetch_limit <= 1000:
            raise ValueError("fetch_limit must be in 1..1000")
        low, high = self.processor_retry_s
        if low < 0 or high < low:
            raise ValueError("processor_retry_s must be (low, high) with 0 <= low <= high")
