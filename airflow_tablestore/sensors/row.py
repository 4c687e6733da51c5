"""``TablestoreRowSensor``: wait until a row exists, or until one of its columns holds a value."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import Context, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.operators.arguments import check_positive, check_table_name
from airflow_tablestore.operators.base import closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast
from airflow_tablestore.sensors.base import TablestoreBaseSensor
from airflow_tablestore.triggers.row import TablestoreRowTrigger
from airflow_tablestore.triggers.row_check import RowCheck


class TablestoreRowSensor(TablestoreBaseSensor[TablestoreHook]):
    """Succeed once the row ``primary_key`` of ``table_name`` exists — or, with ``column``, once that column's
    newest value is ``expected`` (one value, or a list of accepted values; without ``expected``: once the
    column is set). Like the Amazon provider's ``DynamoDBValueSensor``.

    Deferrable by default when ``[operators] default_deferrable`` is set: the wait then runs in the triggerer
    (:class:`~airflow_tablestore.triggers.row.TablestoreRowTrigger`) until ``max_wait_seconds`` (default: the
    sensor's ``timeout``). A missing table, bad credentials or malformed arguments fail at once.

    :param table_name: the table; templated.
    :param primary_key: ``{name: value}`` or ``[(name, value), ...]`` in the table's key order (INTEGER and
        STRING values); templated.
    :param column: the attribute column to look at (None: the row's existence is enough); templated.
    :param expected: the value (or list of values) to wait for; templated.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param max_wait_seconds: deadline of the deferred wait (default: ``timeout``).
    :return: (XCom) ``{"message"}``: what was found.
    """

    hook_class = TablestoreHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "primary_key", "column", "expected")
    ui_color = "#ffe0b3"

    def __init__(self, *, table_name: str, primary_key: dict[str, Any] | Sequence[Sequence[Any]],
                 column: str | None = None, expected: Any = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 max_wait_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_wait_seconds is not None:
            check_positive("max_wait_seconds", max_wait_seconds)
        self.table_name = table_name
        self.primary_key = primary_key
        self.column = column
        self.expected = expected
        self.deferrable = deferrable
        self.max_wait_seconds = max_wait_seconds
        if "{{" not in repr((primary_key, column)):  # literal arguments are checked when the DAG is parsed
            RowCheck.build(table_name, primary_key, column, expected)

    def _check(self) -> RowCheck:
        try:
            check_table_name("table_name", self.table_name)
            return RowCheck.build(self.table_name, self.primary_key, self.column, self.expected)
        except ValueError as err:
            raise AirflowFailException(str(err)) from None

    def _poke_once(self, check: RowCheck) -> tuple[bool, str]:
        with fail_fast():  # a missing table, bad credentials, a malformed connection
            row = self.hook.get_conn().get_row(check.table_name, list(check.primary_key),
                                               columns=[check.column] if check.column else None)
        return check.met(row)

    def poke(self, context: Context) -> PokeReturnValue:
        done, message = self._poke_once(self._check())
        self.log.info("%s", message)
        return PokeReturnValue(is_done=done, xcom_value={"message": message} if done else None)

    @closes_hooks
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        check = self._check()
        done, message = self._poke_once(check)
        if done:
            self.log.info("%s", message)
            return {"message": message}
        max_wait = self.max_wait_seconds if self.max_wait_seconds is not None else float(self.timeout or 7 * 86400)
        self.log.info("Deferring: %s", message)
        self.defer(
            trigger=TablestoreRowTrigger(check=check.as_dict(), hook_params=self.hook.hook_params,
                                         poll_interval=float(self.poke_interval), max_wait_seconds=max_wait),
            method_name="execute_complete",
            timeout=timedelta(seconds=max_wait + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: the success payload, or the timeout / error as the task's outcome."""
        message = str(self.successful_event(event, "the row").get("message"))
        self.log.info("%s", message)
        return {"message": message}
