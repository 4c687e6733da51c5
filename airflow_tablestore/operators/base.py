"""The generic base of the Tablestore operators: the connection arguments, their templating and the hook.

Like the Amazon provider's ``AwsBaseOperator``: a subclass names its hook class in ``hook_class`` and gets the
``tablestore_conn_id`` and ``region`` arguments, their templating and a cached ``hook``::

    class MyOperator(TablestoreBaseOperator[TablestoreHook]):
        hook_class = TablestoreHook
        template_fields = tablestore_template_fields("table_name")
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any, Generic, TypeVar

from airflow.sdk import BaseOperator

from airflow_tablestore.hooks.base import DEFAULT_CONN_ID, TablestoreBaseHook

HookT = TypeVar("HookT", bound=TablestoreBaseHook[Any])

CONNECTION_TEMPLATE_FIELDS: tuple[str, ...] = ("tablestore_conn_id", "region")


def tablestore_template_fields(*fields: str) -> Sequence[str]:
    """``template_fields`` of a Tablestore operator: the connection fields plus ``fields``."""
    return (*CONNECTION_TEMPLATE_FIELDS, *fields)


class TablestoreHookMixin(Generic[HookT]):
    """``tablestore_conn_id``, ``region`` and the cached ``hook`` built from them (see the module docstring).

    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's ``region`` extra (V4 signing).
    """

    hook_class: type[HookT]
    tablestore_conn_id: str
    region: str | None

    def _init_connection(self, tablestore_conn_id: str, region: str | None) -> None:
        self.tablestore_conn_id = tablestore_conn_id
        self.region = region

    def make_hook(self, conn_id: str | None = None) -> HookT:
        """A new hook for ``conn_id`` (default: ``tablestore_conn_id``) with this task's ``region``."""
        return self.hook_class(conn_id or self.tablestore_conn_id, region=self.region)

    @cached_property
    def hook(self) -> HookT:
        """The hook of ``tablestore_conn_id``, built on first use (after templates are rendered)."""
        return self.make_hook()


class TablestoreBaseOperator(BaseOperator, TablestoreHookMixin[HookT]):
    """Base of the Tablestore operators: the connection arguments and the cached ``hook``."""

    template_fields: Sequence[str] = CONNECTION_TEMPLATE_FIELDS

    def __init__(self, *, tablestore_conn_id: str = DEFAULT_CONN_ID, region: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_connection(tablestore_conn_id, region)
