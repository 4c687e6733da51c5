"""The generic base of the Tablestore sensors (the same connection boilerplate as ``operators/base.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.operators.base import CONNECTION_TEMPLATE_FIELDS, HookT, TablestoreHookMixin


class TablestoreBaseSensor(BaseSensorOperator, TablestoreHookMixin[HookT]):
    """Base of the Tablestore sensors: the connection arguments and the cached ``hook``."""

    template_fields: Sequence[str] = CONNECTION_TEMPLATE_FIELDS

    def __init__(self, *, tablestore_conn_id: str = DEFAULT_CONN_ID, region: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_connection(tablestore_conn_id, region)
