"""``TablestoreRowTrigger``: waits asynchronously until a row exists or one of its columns holds a value."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tablestore.client.errors import TablestoreError
from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.triggers.row_check import RowCheck
from airflow_tablestore.triggers.tunnel import TRANSIENT_ERRORS


class TablestoreRowTrigger(BaseTrigger):
    """Poll GetRow until :class:`RowCheck` is met. One event: ``{"status": "success", "message", "row"}``,
    ``{"status": "timeout", ...}`` once the absolute ``deadline`` passed (a triggerer restart does not extend it),
    or ``{"status": "error", "code", "message"}`` on a permanent error (a missing table, bad credentials)."""

    def __init__(self, *, check: dict[str, Any], hook_params: dict[str, Any] | None = None,
                 poll_interval: float = 30.0, max_wait_seconds: float = 7 * 24 * 3600,
                 deadline: float | None = None) -> None:
        super().__init__()
        self.check = RowCheck.from_dict(check)
        self.hook_params = dict(hook_params or {"tablestore_conn_id": DEFAULT_CONN_ID})
        self.poll_interval = float(poll_interval)
        self.max_wait_seconds = float(max_wait_seconds)
        self.deadline = float(deadline) if deadline is not None else time.time() + self.max_wait_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"check": self.check.as_dict(), "hook_params": self.hook_params, "poll_interval": self.poll_interval,
                 "max_wait_seconds": self.max_wait_seconds, "deadline": self.deadline})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        check = self.check
        polls = 0
        try:
            with TablestoreHook(**self.hook_params) as hook:
                await hook.aget_config()
                client = hook.get_conn()
                while True:
                    polls += 1
                    try:
                        row = await asyncio.to_thread(client.get_row, check.table_name, list(check.primary_key),
                                                      columns=[check.column] if check.column else None)
                    except TRANSIENT_ERRORS as err:
                        self.log.warning("Transient error reading the row (will retry): %s", err)
                    else:
                        done, message = check.met(row)
                        if done:
                            yield TriggerEvent({"status": "success", "message": message})
                            return
                        self.log.info("Poll %d: %s", polls, message)
                    remaining = self.deadline - time.time()
                    if remaining <= 0:
                        yield TriggerEvent({"status": "timeout", "message": f"gave up after max_wait_seconds="
                                            f"{self.max_wait_seconds:g} ({polls} polls)"})
                        return
                    await asyncio.sleep(min(self.poll_interval, remaining))
        except TablestoreError as err:
            yield TriggerEvent({"status": "error", "code": err.code, "message": str(err)})
        except Exception as err:  # noqa: BLE001 - e.g. an unknown connection id: end with an event, not a crash
            yield TriggerEvent({"status": "error", "code": type(err).__name__,
                                "message": f"{type(err).__name__}: {err}"})
