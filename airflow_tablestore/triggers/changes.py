"""``TablestoreTunnelChangesTrigger``: an ``AssetWatcher`` trigger that fires when a tunnel has a batch of
unconsumed changes (enough records, or one waiting long enough).

It never consumes: the count comes from the table's stream past the tunnel's consume point
(:class:`~airflow_tablestore.triggers.changes_watch.TunnelChangesWatch`), so the tunnel's real consumer keeps
every channel.
Reported changes are remembered in memory only; after a triggerer restart the trigger counts again from the
consume point, so changes nobody consumed are reported again (at least once, never lost). Airflow 3.3 tells a
trigger nothing about whether its event reached the metadata database, so a watermark saved when the event is
yielded could skip an event the triggerer lost while dying; the consume point moves only once the consumer has
the changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_tablestore.client.errors import NotFoundError, TablestoreError, TunnelExpiredError
from airflow_tablestore.client.tunnel.consume_point import tunnel_problem_message
from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.triggers.changes_watch import ChangesThresholds, TunnelChangesWatch, changes_event, now_us
from airflow_tablestore.triggers.tunnel import TRANSIENT_ERRORS


class TablestoreTunnelChangesTrigger(BaseEventTrigger):
    """Poll a tunnel every ``poll_interval`` seconds; yield one event per batch of unconsumed changes: once
    ``min_records`` changes past the consume point were not reported yet, or once the oldest of them is
    ``max_delay`` seconds old. Use it in an ``AssetWatcher``; it runs until Airflow stops it.

    The payload: ``table_name``, ``tunnel_name``, ``tunnel_id``, ``reason`` (``min_records`` or ``max_delay``),
    ``records`` (counted since the last event), ``caught_up`` (False: more was left to read), the first and last
    change's commit time (``first_change``/``last_change``, ISO, and ``*_ns``) and the tunnel's consume point
    (``consume_point``, ``consume_point_ns``). Errors never fire (an event would start a DAG run): a missing or
    expired tunnel, a disabled stream or bad credentials are logged at every poll, and the watch goes on.

    :param hook_params: the complete hook configuration (``TablestoreBaseHook.hook_params``: conn id, region,
        timeouts); the triggerer rebuilds the hook from it alone.
    """

    def __init__(self, *, table_name: str, tunnel_name: str, min_records: int = 1000, max_delay: float = 300.0,
                 poll_interval: float = 30.0, hook_params: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.thresholds = ChangesThresholds(min_records, max_delay)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) or poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.min_records = min_records
        self.max_delay = float(max_delay)
        self.poll_interval = float(poll_interval)
        self.hook_params = dict(hook_params or {"tablestore_conn_id": DEFAULT_CONN_ID})

    def serialize(self) -> tuple[str, dict[str, Any]]:
        # deterministic: Airflow identifies an asset watcher's trigger by the hash of these kwargs
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_name": self.table_name, "tunnel_name": self.tunnel_name, "min_records": self.min_records,
                 "max_delay": self.max_delay, "poll_interval": self.poll_interval, "hook_params": self.hook_params})

    def watch(self) -> TunnelChangesWatch:
        """The tunnel watch, over a hook rebuilt from the serialized configuration."""
        return TunnelChangesWatch(TablestoreTunnelHook(**self.hook_params), self.table_name, self.tunnel_name)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        where = f"tunnel {self.tunnel_name!r} on {self.table_name!r}"
        with self.watch() as watch:
            while True:
                try:
                    description, backlog = await watch.apoll()
                except TRANSIENT_ERRORS as err:
                    self.log.warning("Transient error watching %s (will retry): %s", where, err)
                except (NotFoundError, TunnelExpiredError) as err:
                    self.log.error("Watching %s: %s", where,
                                   tunnel_problem_message(err, self.table_name, self.tunnel_name))
                except TablestoreError as err:
                    self.log.error("Watching %s: %s (%s)", where, err, err.code)
                    watch.reconnect()  # e.g. a rotated secret or an expired STS token: read the connection again
                except Exception as err:  # noqa: BLE001 - e.g. an unknown connection id: keep watching, never exit
                    self.log.error("Watching %s: %s: %s", where, type(err).__name__, err)
                    watch.reconnect()
                else:
                    reason = self.thresholds.reason(backlog, now_us())
                    if reason is not None:
                        payload = changes_event(description, backlog, reason)
                        self.log.info("%s: %d unconsumed changes (%s), %s to %s", where, backlog.records, reason,
                                      payload["first_change"], payload["last_change"])
                        yield TriggerEvent(payload)
                        watch.mark_reported()
                    else:
                        self.log.debug("%s: %d unreported changes past the consume point %s", where,
                                       backlog.records, description.consume_point or "(none yet)")
                await asyncio.sleep(self.poll_interval)
