"""The generic base of the Tablestore operators: the connection arguments, their templating and the hook.

Like the Amazon provider's ``AwsBaseOperator``: a subclass names its hook class in ``hook_class`` and gets the
``tablestore_conn_id`` and ``region`` arguments, their templating and a cached ``hook``::

    class MyOperator(TablestoreBaseOperator[TablestoreHook]):
        hook_class = TablestoreHook
        template_fields = tablestore_template_fields("table_name")

        @closes_hooks
        def execute(self, context):
            return self.hook.describe_table(self.table_name) is not None

The clients of the cached hooks (``hook``, and any other hook the task caches, such as ``source_hook``) are
closed when ``execute`` ends, however it ends: each ``execute`` says so with the :func:`closes_hooks` decorator
(``tests/operators/test_closes_hooks.py`` checks that every operator and sensor of the package does). A sensor's
pokes in one ``execute`` share one client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, Generic, TypeVar

from airflow.sdk import BaseOperator

from airflow_tablestore.hooks.base import DEFAULT_CONN_ID, TablestoreBaseHook
from airflow_tablestore.links.console import CONSOLE_LINKS

HookT = TypeVar("HookT", bound=TablestoreBaseHook[Any])

CONNECTION_TEMPLATE_FIELDS: tuple[str, ...] = ("tablestore_conn_id", "region")


def tablestore_template_fields(*fields: str) -> Sequence[str]:
    """``template_fields`` of a Tablestore operator: the connection fields plus ``fields``."""
    return (*CONNECTION_TEMPLATE_FIELDS, *fields)


def closes_hooks(execute: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Tablestore task's ``execute``: when it ends, however it ends, the clients of the hooks the
    task cached are closed (:meth:`TablestoreHookMixin.close_hooks`)."""

    @functools.wraps(execute)
    def run_then_close_hooks(self: TablestoreHookMixin[Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return execute(self, *args, **kwargs)
        finally:
            self.close_hooks()

    run_then_close_hooks.closes_hooks = True  # type: ignore[attr-defined]
    return run_then_close_hooks


class TablestoreHookMixin(Generic[HookT]):
    """``tablestore_conn_id``, ``region`` and the cached ``hook`` built from them (see the module docstring);
    an ``execute`` decorated with :func:`closes_hooks` closes the cached hooks' clients when it ends.

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

    def close_hooks(self) -> None:
        """Close the clients of the hooks this task cached (``hook``, ``source_hook``, ...) and forget them: a hook
        used again is built anew from the connection ids as they are then (OpenLineage methods run after
        ``execute``; ``dag.test()`` runs the same task object again, with other rendered connection ids)."""
        for name, value in list(vars(self).items()):
            if isinstance(value, TablestoreBaseHook):
                value.close()
                del self.__dict__[name]


class TablestoreBaseOperator(BaseOperator, TablestoreHookMixin[HookT]):
    """Base of the Tablestore operators: the connection arguments, the cached ``hook`` and the console links."""

    template_fields: Sequence[str] = CONNECTION_TEMPLATE_FIELDS
    operator_extra_links = CONSOLE_LINKS

    def __init__(self, *, tablestore_conn_id: str = DEFAULT_CONN_ID, region: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_connection(tablestore_conn_id, region)
