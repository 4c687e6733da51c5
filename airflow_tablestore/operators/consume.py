"""``TablestoreTunnelConsumeOperator``: consume a tunnel in the task with the TunnelWorker and your function.

For tables that need no Spark (like the Kafka provider's ``ConsumeFromTopicOperator`` and its
``apply_function``): the task runs a :class:`~airflow_tablestore.client.tunnel.worker.TunnelWorker` that hands
each batch of a channel to ``apply_function(records)`` and checkpoints it on the server after the function
returned, until the tunnel is consumed through a cutoff, a number of records was handed over, or a time ran out.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.client.epoch import ns_to_iso, parse_time_argument
from airflow_tablestore.client.errors import NotFoundError, TunnelExpiredError
from airflow_tablestore.client.model import Record
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
from airflow_tablestore.client.tunnel.consume_point import tunnel_problem_message
from airflow_tablestore.client.tunnel.cutoff import consumed_through
from airflow_tablestore.client.tunnel.processor import CallbackProcessor, ChannelContext
from airflow_tablestore.client.tunnel.worker import TunnelWorker
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.operators.arguments import check_non_empty, check_positive, check_table_name
from airflow_tablestore.operators.base import TablestoreBaseOperator, closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast

ApplyFunction = Callable[[list[Record]], Any]


def resolve_function(function: ApplyFunction | str) -> ApplyFunction:
    """``function`` itself, or the function named by a dotted path (``"my_module.handle"``)."""
    if callable(function):
        return function
    module_name, _, name = str(function).rpartition(".")
    if not module_name:
        raise ValueError(f"apply_function {function!r} is neither a callable nor a dotted path 'module.function'")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"apply_function {function!r} cannot be imported: {err}") from None
    if not callable(found):
        raise ValueError(f"apply_function {function!r} is not callable")
    return found


class TablestoreTunnelConsumeOperator(TablestoreBaseOperator[TablestoreTunnelHook]):
    """Consume a tunnel with the TunnelWorker, handing every batch to ``apply_function(records)``.

    Stops when the tunnel is consumed through ``cutoff`` (the consume-point sensor's rule), soon after at least
    ``max_records`` records were handed over (batches in flight finish), or after ``max_seconds`` — whichever
    comes first. **At least
    once**: a batch is checkpointed on the server after ``apply_function`` returned for it, so a batch whose
    task died before the checkpoint is handed over again by the next try or run (make the function
    idempotent). Channels run in parallel threads: the function may be called concurrently. An exception in
    the function fails the task (its batch is not checkpointed). Errors no retry can fix (a missing or expired
    tunnel, bad credentials, a malformed argument) fail at once.

    :param table_name: table of the tunnel.
    :param tunnel_name: tunnel to consume (see ``TablestoreCreateTunnelOperator``).
    :param apply_function: ``f(records: list[Record])``, or its dotted import path (not templated).
    :param cutoff: stop once the tunnel is consumed through this time (datetime, ISO-8601 or epoch number;
        templated). ``None``: no cutoff (give ``max_records`` or ``max_seconds``).
    :param max_records: stop soon after this many records were handed over.
    :param max_seconds: stop after this many seconds (default 3600).
    :param heartbeat_interval: seconds between the worker's heartbeats (default 5).
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) ``{"records", "stopped", "consume_point", "seconds"}``; ``stopped`` is ``cutoff``,
        ``max_records`` or ``max_seconds``.
    """

    hook_class = TablestoreTunnelHook
    # not apply_function: Airflow calls a callable in a templated field at render time, with the context
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "cutoff")
    ui_color = "#ffc77a"

    def __init__(
        self,
        *,
        table_name: str,
        tunnel_name: str,
        apply_function: ApplyFunction | str,
        cutoff: datetime | str | int | float | None = None,
        max_records: int | None = None,
        max_seconds: float = 3600.0,
        heartbeat_interval: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_records is not None:
            check_positive("max_records", max_records, integer=True)
        check_positive("max_seconds", max_seconds)
        check_positive("heartbeat_interval", heartbeat_interval)
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.apply_function = apply_function
        self.cutoff = cutoff
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.heartbeat_interval = heartbeat_interval

    @closes_hooks
    def execute(self, context: Context) -> dict[str, Any]:
        with fail_fast():
            check_table_name("table_name", self.table_name)
            check_non_empty("tunnel_name", self.tunnel_name)
            function = resolve_function(self.apply_function)
            cutoff_ns = self._cutoff_ns()
            try:
                description = self.hook.get_conn().describe_tunnel(self.table_name, self.tunnel_name)
            except (NotFoundError, TunnelExpiredError) as err:
                raise AirflowFailException(tunnel_problem_message(err, self.table_name, self.tunnel_name)) from err
            if description.tunnel.expired:
                raise AirflowFailException(f"tunnel {self.tunnel_name!r} of table {self.table_name!r} expired: "
                                           "delete and recreate it")
        return self._consume(function, description.tunnel.tunnel_id, cutoff_ns)

    def _cutoff_ns(self) -> int | None:
        if self.cutoff in (None, ""):
            return None
        return parse_time_argument("cutoff", self.cutoff)

    def _consume(self, function: ApplyFunction, tunnel_id: str, cutoff_ns: int | None) -> dict[str, Any]:
        client = self.hook.get_conn()
        handed = 0
        lock = threading.Lock()
        enough = threading.Event()

        failures: list[BaseException] = []

        def process(records: list[Record], context: ChannelContext) -> None:
            nonlocal handed
            try:
                function(records)
            except BaseException as exc:  # not checkpointed: the batch is handed over again by the next try
                failures.append(exc)
                enough.set()
                raise
            with lock:
                handed += len(records)
                if self.max_records is not None and handed >= self.max_records:
                    enough.set()

        config = TunnelWorkerConfig(heartbeat_interval_s=self.heartbeat_interval,
                                    heartbeat_timeout_s=max(60.0, 6 * self.heartbeat_interval),
                                    checkpoint_interval_s=0.0, allow_short_intervals=True,
                                    progress_log_interval_s=30.0)
        worker = TunnelWorker(client, tunnel_id, CallbackProcessor(process), config)
        started = time.monotonic()
        stopped = "max_seconds"
        self.log.info("Consuming tunnel %r of %r until %s", self.tunnel_name, self.table_name,
                      self._bounds(cutoff_ns))
        worker.start()
        try:
            while time.monotonic() - started < self.max_seconds:
                if enough.wait(min(self.heartbeat_interval, 2.0)):
                    stopped = "failure" if failures else "max_records"
                    break
                if worker.error is not None:
                    break
                if cutoff_ns is not None:
                    progress = consumed_through(client.describe_tunnel(self.table_name, self.tunnel_name), cutoff_ns)
                    self.log.info("%d records handed over; %s", handed, progress.message)
                    if progress.done:
                        stopped = "cutoff"
                        break
        finally:
            worker.shutdown(graceful=True)  # checkpoints what the function handled, then leaves the tunnel
        if failures:
            raise failures[0]  # the function's own error; the task's retries hand the batch over again
        if worker.error is not None:
            raise AirflowFailException(f"the tunnel worker stopped: {worker.error}")
        point = client.describe_tunnel(self.table_name, self.tunnel_name).consume_point_ns
        result = {"records": handed, "stopped": stopped, "consume_point": ns_to_iso(point),
                  "seconds": round(time.monotonic() - started, 3)}
        self.log.info("Handed %d records to %s; stopped at %s; consume point %s", handed,
                      getattr(function, "__name__", function), stopped, result["consume_point"])
        if stopped == "max_seconds" and cutoff_ns is not None:
            self.log.warning("max_seconds (%s) ran out before the tunnel was consumed through the cutoff",
                             self.max_seconds)
        return result

    def _bounds(self, cutoff_ns: int | None) -> str:
        bounds = [f"consumed through {ns_to_iso(cutoff_ns)}"] if cutoff_ns is not None else []
        if self.max_records is not None:
            bounds.append(f"{self.max_records} records")
        bounds.append(f"{self.max_seconds:.0f}s")
        return ", or ".join(bounds)

