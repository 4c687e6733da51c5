"""A tunnel's unconsumed changes for event-driven scheduling: when they are worth an event (records or delay), and
the event's payload.

The counting is :class:`airflow_tablestore.client.stream.backlog.StreamBacklog` (the table's stream, read with
iterators of its own, consuming nothing); :class:`TunnelChangesWatch` pairs it with DescribeTunnel (the consume
point) for ``TablestoreTunnelChangesTrigger``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.epoch import ns_to_iso
from airflow_tablestore.client.errors import TunnelExpiredError
from airflow_tablestore.client.model import TunnelDescription
from airflow_tablestore.client.stream.backlog import Backlog, StreamBacklog, unconsumed_since_ns
from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

MIN_RECORDS = "min_records"
MAX_DELAY = "max_delay"


@dataclass(frozen=True)
class ChangesThresholds:
    """Fire once ``min_records`` unreported changes are pending, or once the oldest of them is ``max_delay``
    seconds old (so a quiet table's few changes are not held back for ever)."""

    min_records: int
    max_delay: float

    def __post_init__(self) -> None:
        if isinstance(self.min_records, bool) or not isinstance(self.min_records, int) or self.min_records < 1:
            raise ValueError(f"min_records must be a positive integer, got {self.min_records!r}")
        if isinstance(self.max_delay, bool) or not isinstance(self.max_delay, (int, float)) or self.max_delay <= 0:
            raise ValueError(f"max_delay must be a positive number of seconds, got {self.max_delay!r}")

    def reason(self, backlog: Backlog, now_us: int) -> str | None:
        """``"min_records"``, ``"max_delay"`` or None (not yet)."""
        if backlog.records >= self.min_records:
            return MIN_RECORDS
        if backlog.records and backlog.first_us is not None and now_us - backlog.first_us >= self.max_delay * 1e6:
            return MAX_DELAY
        return None


def changes_event(description: TunnelDescription, backlog: Backlog, reason: str) -> dict[str, Any]:
    """The JSON payload of one event (Airflow stores it as the asset event's ``extra["payload"]``)."""
    info = description.tunnel
    first_ns = (backlog.first_us or 0) * 1000
    last_ns = (backlog.last_us or 0) * 1000
    return {
        "table_name": info.table_name,
        "tunnel_name": info.tunnel_name,
        "tunnel_id": info.tunnel_id,
        "reason": reason,
        "records": backlog.records,
        "caught_up": backlog.caught_up,
        "first_change_ns": first_ns,
        "first_change": ns_to_iso(first_ns),
        "last_change_ns": last_ns,
        "last_change": ns_to_iso(last_ns),
        "consume_point_ns": backlog.consume_point_ns,
        "consume_point": ns_to_iso(backlog.consume_point_ns),
    }


class TunnelChangesWatch:
    """One tunnel's unconsumed, unreported changes: :meth:`apoll` reads the consume point and counts past it,
    :meth:`mark_reported` forgets what was reported. Use as a context manager (it closes both clients)."""

    def __init__(self, hook: TablestoreTunnelHook, table_name: str, tunnel_name: str) -> None:
        self.hook = hook
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self._stream: StreamClient | None = None
        self._backlog: StreamBacklog | None = None

    async def apoll(self) -> tuple[TunnelDescription, Backlog]:
        """DescribeTunnel, then the stream past its consume point (connection read with ``aget_connection``, HTTP
        in a thread). Raises :class:`TunnelExpiredError` for an expired tunnel and the client's errors."""
        config = await self.hook.aget_config()
        tunnels = self.hook.get_conn()  # config is cached: no synchronous connection lookup happens here
        if self._stream is None:
            self._stream = StreamClient(**config.client_kwargs())
        if self._backlog is None:
            self._backlog = StreamBacklog(self._stream, self.table_name)
        backlog = self._backlog
        backlog.client = self._stream
        description = await asyncio.to_thread(tunnels.describe_tunnel, self.table_name, self.tunnel_name)
        if description.tunnel.expired:
            raise TunnelExpiredError(
                "OTSTunnelExpired",
                f"tunnel {self.tunnel_name!r} on table {self.table_name!r} has expired (its stream position fell "
                "out of the stream log retention): delete and recreate it")
        found = await asyncio.to_thread(backlog.poll, unconsumed_since_ns(description))
        return description, found

    def mark_reported(self) -> None:
        if self._backlog is not None:
            self._backlog.mark_reported()

    def reconnect(self) -> None:
        """Close both clients and read the connection again at the next poll (after an error that a changed
        connection may fix: a rotated secret, an expired STS token); what was reported is kept."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self.hook.forget_connection()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream, self._backlog = None, None
        self.hook.close()

    def __enter__(self) -> TunnelChangesWatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def now_us() -> int:
    """Wall-clock microseconds since epoch (stream commit times are in the same unit)."""
    return time.time_ns() // 1000
