"""The generic base of the Tablestore sensors (the same connection boilerplate as ``operators/base.py``).

As for the operators, the cached hooks' clients are closed when ``execute`` ends (after the pokes of a
sensor in poke mode, the one poke of a reschedule, or the check before it defers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, AirflowSkipException

from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.links.console import CONSOLE_LINKS
from airflow_tablestore.operators.base import CONNECTION_TEMPLATE_FIELDS, HookT, TablestoreHookMixin, closes_hooks


class TablestoreBaseSensor(BaseSensorOperator, TablestoreHookMixin[HookT]):
    """Base of the Tablestore sensors: the connection arguments, the cached ``hook`` and the console links."""

    template_fields: Sequence[str] = CONNECTION_TEMPLATE_FIELDS
    operator_extra_links = CONSOLE_LINKS

    def __init__(self, *, tablestore_conn_id: str = DEFAULT_CONN_ID, region: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_connection(tablestore_conn_id, region)

    @closes_hooks
    def execute(self, context: Context) -> Any:
        """Poke until done (``BaseSensorOperator.execute``); the hooks' clients are closed afterwards."""
        return super().execute(context)

    def successful_event(self, event: dict[str, Any] | None, waiting_for: str) -> dict[str, Any]:
        """A trigger's event when it reports success; a missing, timeout or error event becomes the task's
        outcome (skip on timeout with ``soft_fail``, else a sensor timeout; an error fails at once)."""
        if not event:
            raise AirflowFailException("trigger ended without an event")
        if event.get("status") == "success":
            return event
        message = str(event.get("message") or event)
        if event.get("status") == "timeout":
            if self.soft_fail:
                raise AirflowSkipException(message)
            raise AirflowSensorTimeout(message)
        raise AirflowFailException(f"waiting for {waiting_for} failed: {message}")
