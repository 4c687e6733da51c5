"""``TablestoreTunnelConsumePointTrigger``: waits asynchronously until a tunnel is consumed up to a cutoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tablestore.client.errors import (
    NotFoundError,
    ServerError,
    TablestoreError,
    TablestoreNetworkError,
    ThrottledError,
    TunnelExpiredError,
)
from airflow_tablestore.client.tunnel.consume_point import tunnel_problem_message
from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

#: Errors worth another poll (the next poll may succeed); anything else ends the wait with an error event.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (ThrottledError, ServerError, TablestoreNetworkError)


class TablestoreTunnelConsumePointTrigger(BaseTrigger):
    """Poll DescribeTunnel until the consume point reaches ``cutoff_ns`` (BaseData: all channels done).

    Yields exactly one event: ``{"status": "success", ...check}``, ``{"status": "timeout", ...}`` once
    ``deadline`` (epoch seconds; default now + ``max_wait_seconds``) passes, or ``{"status": "error",
    "code", "message"}`` for a missing/expired tunnel or a permanent error. The deadline is absolute, so a
    triggerer restart does not extend the wait.

    :param hook_params: the complete hook configuration (``TablestoreBaseHook.hook_params``: conn id,
        region, timeouts); the triggerer rebuilds the hook from it alone.
    """

    def __init__(
        self,
        *,
        table_name: str,
        tunnel_name: str,
        cutoff_ns: int,
        hook_params: dict[str, Any] | None = None,
        poll_interval: float = 30.0,
        max_wait_seconds: float = 7 * 24 * 3600,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.cutoff_ns = int(cutoff_ns)
        self.hook_params = dict(hook_params or {"tablestore_conn_id": DEFAULT_CONN_ID})
        self.poll_interval = float(poll_interval)
        self.max_wait_seconds = float(max_wait_seconds)
        self.deadline = float(deadline) if deadline is not None else time.time() + self.max_wait_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_name": self.table_name,
                "tunnel_name": self.tunnel_name,
                "cutoff_ns": self.cutoff_ns,
                "hook_params": self.hook_params,
                "poll_interval": self.poll_interval,
                "max_wait_seconds": self.max_wait_seconds,
                "deadline": self.deadline,
            },
        )

    def hook(self) -> TablestoreTunnelHook:
        """A hook rebuilt from the serialized configuration."""
        return TablestoreTunnelHook(**self.hook_params)

    def _base_event(self) -> dict[str, Any]:
        return {"table_name": self.table_name, "tunnel_name": self.tunnel_name, "cutoff_ns": self.cutoff_ns}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = 0
        with self.hook() as hook:
            try:
                while True:
                    polls += 1
                    try:
                        check = await hook.acheck_consume_point(self.table_name, self.tunnel_name, self.cutoff_ns)
                    except TRANSIENT_ERRORS as err:
                        self.log.warning("Transient error polling tunnel %r (will retry): %s", self.tunnel_name, err)
                    else:
                        if check.done:
                            self.log.info("Tunnel %r reached the cutoff: %s", self.tunnel_name, check.message)
                            yield TriggerEvent({"status": "success", **self._base_event(), **check.as_event()})
                            return
                        self.log.info("Tunnel %r poll %d: %s", self.tunnel_name, polls, check.message)
                    remaining = self.deadline - time.time()
                    if remaining <= 0:
                        yield TriggerEvent({
                            "status": "timeout",
                            **self._base_event(),
                            "message": f"tunnel {self.tunnel_name!r} on {self.table_name!r} did not reach the "
                                       f"cutoff within max_wait_seconds={self.max_wait_seconds:g} ({polls} polls)",
                        })
                        return
                    await asyncio.sleep(min(self.poll_interval, remaining))
            except (NotFoundError, TunnelExpiredError) as err:
                yield TriggerEvent({"status": "error", **self._base_event(), "code": err.code,
                                    "message": tunnel_problem_message(err, self.table_name, self.tunnel_name)})
            except TablestoreError as err:
                yield TriggerEvent({"status": "error", **self._base_event(), "code": err.code, "message": str(err)})
            except Exception as err:  # noqa: BLE001 - e.g. an unknown connection id: end with an event, not a crash
                yield TriggerEvent({"status": "error", **self._base_event(), "code": type(err).__name__,
                                    "message": f"{type(err).__name__}: {err}"})
