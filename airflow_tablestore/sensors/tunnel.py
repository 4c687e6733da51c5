"""``TablestoreTunnelConsumePointSensor``: wait until a tunnel's consumers have caught up with a cutoff."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Context, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.client.epoch import parse_epoch_ns, parse_time_argument
from airflow_tablestore.client.errors import NotFoundError, TunnelExpiredError
from airflow_tablestore.client.tunnel.consume_point import ConsumePointCheck, tunnel_problem_message
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.operators.arguments import check_non_empty, check_positive, check_table_name
from airflow_tablestore.operators.base import closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast
from airflow_tablestore.sensors.base import TablestoreBaseSensor
from airflow_tablestore.triggers.tunnel import TablestoreTunnelConsumePointTrigger


class TablestoreTunnelConsumePointSensor(TablestoreBaseSensor[TablestoreTunnelHook]):
    """Succeed once the tunnel's consume point is at or past ``cutoff``.

    For Stream/BaseAndStream tunnels the consume point is the service's tunnel RPO (the slowest stream
    channel); a BaseData tunnel succeeds once every channel is TERMINATED. A missing or expired tunnel fails
    the task immediately (``AirflowFailException``: retrying cannot help).

    ``cutoff`` defaults to the run's ``data_interval_end``; runs without a data interval (manual runs in
    Airflow 3) fall back to ``dag_run.run_after``, then to now. A tunnel created after the cutoff is through it
    at once (its channels start where it started): the sensor then succeeds and logs that there was nothing to
    wait for. A malformed ``cutoff`` fails the task at once (no retry).

    Deferrable by default when ``[operators] default_deferrable`` is set (recommended: reschedule mode is
    hit by an Airflow 3.2/3.3 executor race, see docs/airflow.md). The trigger stops after
    ``max_wait_seconds`` (default: the sensor ``timeout``).

    :param table_name: table of the tunnel.
    :param tunnel_name: tunnel name.
    :param cutoff: datetime, ISO-8601 string or epoch number (s/ms/us/ns by magnitude); templated.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param max_wait_seconds: deadline of the deferred wait (default: ``timeout``).
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) ``{"tunnel_id", "tunnel_type", "consume_point_ns", "consume_point", "message"}``.
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "cutoff")
    ui_color = "#ffd39a"

    def __init__(
        self,
        *,
        table_name: str,
        tunnel_name: str,
        cutoff: datetime | str | int | float | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        max_wait_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_wait_seconds is not None:
            check_positive("max_wait_seconds", max_wait_seconds)
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.cutoff = cutoff
        self.deferrable = deferrable
        self.max_wait_seconds = max_wait_seconds

    def resolve_cutoff_ns(self, context: Context) -> int:
        """The cutoff in ns: ``cutoff``, else ``data_interval_end``, else ``dag_run.run_after``, else now."""
        if self.cutoff not in (None, ""):
            with fail_fast():  # a malformed argument: no retry can fix it
                return parse_time_argument("cutoff", self.cutoff)
        interval_end = context.get("data_interval_end")
        if interval_end is not None:
            return parse_epoch_ns(interval_end)
        dag_run = context.get("dag_run")
        run_after = getattr(dag_run, "run_after", None)
        if run_after is not None:
            self.log.info("Run has no data interval: using run_after %s as the cutoff", run_after)
            return parse_epoch_ns(run_after)
        return parse_epoch_ns(datetime.now(UTC))

    def _check(self, cutoff_ns: int) -> ConsumePointCheck:
        with fail_fast():  # credentials, bad parameters, a malformed connection
            check_table_name("table_name", self.table_name)
            check_non_empty("tunnel_name", self.tunnel_name)
            try:
                return self.hook.check_consume_point(self.table_name, self.tunnel_name, cutoff_ns)
            except (NotFoundError, TunnelExpiredError) as err:  # say what to do about the tunnel itself
                raise AirflowFailException(tunnel_problem_message(err, self.table_name, self.tunnel_name)) from err

    def poke(self, context: Context) -> PokeReturnValue:
        check = self._check(self.resolve_cutoff_ns(context))
        self.log.info("Tunnel %r on %r: %s", self.tunnel_name, self.table_name, check.message)
        return PokeReturnValue(is_done=check.done, xcom_value=check.as_event() if check.done else None)

    @closes_hooks
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        cutoff_ns = self.resolve_cutoff_ns(context)
        check = self._check(cutoff_ns)  # fails fast on a missing tunnel; no deferral if already done
        if check.done:
            self.log.info("Tunnel %r already at the cutoff: %s", self.tunnel_name, check.message)
            return check.as_event()
        max_wait = self.max_wait_seconds if self.max_wait_seconds is not None else float(self.timeout or 7 * 86400)
        self.log.info("Deferring: %s", check.message)
        self.defer(
            trigger=TablestoreTunnelConsumePointTrigger(
                table_name=self.table_name,
                tunnel_name=self.tunnel_name,
                cutoff_ns=cutoff_ns,
                hook_params=self.hook.hook_params,
                poll_interval=float(self.poke_interval),
                max_wait_seconds=max_wait,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=max_wait + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: return the success payload, raise on timeout/error events."""
        event = self.successful_event(event, "the tunnel consume point")
        self.log.info("Tunnel %r reached the cutoff: %s", self.tunnel_name, event.get("message"))
        return {k: v for k, v in event.items() if k not in ("status", "table_name", "tunnel_name", "cutoff_ns")}
