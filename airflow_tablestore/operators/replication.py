"""Operators that steer a replication run: check its parameters, choose its phases, announce its result.

A replication DAG (``example_dags/tablestore_replication.py`` is the example) consumes one BaseAndStream tunnel with
the Spark consumer in two phases, ``full`` (the base data, once) and ``incremental`` (the stream up to the
run's cutoff, :data:`RUN_CUTOFF`), into a Tablestore table or a Parquet change log:

- :class:`TablestoreReplicationSinkBranchOperator` checks the parameters together (:func:`parameter_problems`)
  and branches on the sink;
- :class:`TablestoreReplicationPlanOperator` reads the tunnel and chooses the phases, or a rebuild of a past
  interval (:func:`plan_branches`; the rebuild steps are :mod:`airflow_tablestore.operators.rebuild`);
- :class:`TablestoreAnnounceReplicationOperator` adds an Asset event for what the run brought up to date.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.branch import BaseBranchOperator
from airflow.sdk import Asset, AssetAlias, BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.assets.tablestore import create_asset
from airflow_tablestore.client.changelog import aligned, interval_partitions
from airflow_tablestore.hooks.base import DEFAULT_CONN_ID
from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.operators.arguments import check_choice, check_non_empty, check_table_name
from airflow_tablestore.operators.base import TablestoreHookMixin, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast

if TYPE_CHECKING:
    from airflow_tablestore.client.tunnel.cutoff import Progress

RUN_CUTOFF = ("{{ (data_interval_end if data_interval_end is defined and data_interval_end"
              " else dag_run.run_after).isoformat() }}")
"""Template of a run's cutoff: the end of its data interval, or its ``run_after`` when it has no logical date
(a REST trigger with ``"logical_date": null`` has no data interval, and Airflow renders with StrictUndefined,
hence ``is defined``)."""

PLACEHOLDERS = {"source_table": "source_table", "destination_table": "replica_table"}
"""The example replication DAG's default table names: a run that still has them was not configured."""

PLAN_XCOM_KEY = "branches"
"""The XCom key of the task ids :class:`TablestoreReplicationPlanOperator` chose."""

DEFAULT_ASSET_ALIAS = "tablestore_replication"
"""The ``AssetAlias`` a replication's Asset events are added to."""

SINK_TYPES = ("tablestore", "parquet")
"""The replication's sinks."""

PARTITIONINGS = ("hour", "day")
"""The partitionings of a replication's change log (its intervals are rebuilt and announced per partition)."""
TASK_ID = "a task id (a non-empty string)"


def _check_task_ids(**task_ids: Any) -> None:
    for argument, task_id in task_ids.items():
        check_non_empty(argument, task_id, TASK_ID)


def parameter_problems(*, sink_type: str, parquet_path: str | None, source_table: str, destination_table: str,
                       tablestore_conn_id: str, sink_tablestore_conn_id: str) -> list[str]:
    """What is wrong with a combination of replication parameters (each valid on its own), as sentences.

    :param sink_type: ``tablestore`` or ``parquet``.
    :param parquet_path: the change log's root (the Parquet sink needs one).
    :param source_table: the replicated table.
    :param destination_table: the replica (Tablestore sink).
    :param tablestore_conn_id: the source's connection.
    :param sink_tablestore_conn_id: the replica's connection.
    """
    problems = []
    placeholders = [f"{name}={value!r}" for name, value in (("source_table", source_table),
                                                            ("destination_table", destination_table))
                    if value == PLACEHOLDERS[name]]
    if placeholders and source_table == PLACEHOLDERS["source_table"]:
        problems.append(f"the parameters still hold the example's placeholders ({', '.join(placeholders)}): set "
                        "your tables in the trigger form, or build the DAG with replication_dag(source_table=..., "
                        "destination_table=...) for scheduled runs")
    if sink_type == "parquet" and not (parquet_path or "").strip():
        problems.append("the Parquet sink needs 'Change-log path' (parquet_path)")
    if sink_type == "tablestore" and destination_table == source_table \
            and sink_tablestore_conn_id == tablestore_conn_id:
        problems.append("the destination table is the source table on the same connection: replicating into "
                        "it would feed its own stream; choose another table or destination connection")
    return problems


def plan_branches(*, full_done: bool, progress: Progress, sink_type: str, start: datetime | None,
                  end: datetime | None, try_number: int, run_type: str, stream_start_ns: int,
                  partition_by: str = "hour", full_phase_task_id: str, incremental_phase_task_id: str,
                  rebuild_task_id: str, wait_task_id: str) -> tuple[list[str], str]:
    """A replication run's plan: the task ids of the branches to follow and why.

    The full phase while base data is left, else the incremental phase until the tunnel is consumed through
    the cutoff. With the Parquet sink, an interval of whole partitions is rebuilt from a bounded tunnel (after
    the phases) when the run is a rerun of an interval already consumed (a cleared or retried task, a
    backfill) or when the interval began before the main tunnel's stream (its earlier changes reached the sink
    as base data). With the Tablestore sink a rerun of a consumed interval is a no-op: the replica already
    holds later state. With nothing to run, the plan is to wait for the consume point.

    :param full_done: whether the tunnel finished its base data.
    :param progress: how far the tunnel is consumed towards the run's cutoff
        (:func:`~airflow_tablestore.client.tunnel.cutoff.consumed_through`).
    :param sink_type: ``tablestore`` or ``parquet``.
    :param start: the run's data interval start (None without a logical date).
    :param end: the run's data interval end (None without a logical date).
    :param try_number: the planning task's try (above 1: a cleared or retried run).
    :param run_type: the DAG run's type (``backfill``, ``scheduled``, ``manual``...).
    :param stream_start_ns: where the main tunnel's stream begins.
    :param partition_by: the change log's partitioning (``hour`` or ``day``).
    :param full_phase_task_id: the full phase's task.
    :param incremental_phase_task_id: the incremental phase's task.
    :param rebuild_task_id: the first task of a past interval's rebuild.
    :param wait_task_id: the task that follows when there is nothing to run.
    """
    from airflow_tablestore.client.epoch import to_ns

    next_phase = incremental_phase_task_id if full_done else full_phase_task_id
    branches = [] if full_done and progress.done else [next_phase]
    rerun = try_number > 1 or run_type == "backfill"
    before_tunnel = bool(start and stream_start_ns and to_ns(start) < stream_start_ns)
    if start is None or end is None or not (before_tunnel or (rerun and progress.done)):
        return branches or [wait_task_id], progress.message  # the phases (or nothing) do this run's work
    interval = f"[{start.isoformat()}, {end.isoformat()})"
    if sink_type == "tablestore" and not full_done:
        reason = (f"the full phase copies the table as it was when the tunnel started, which covers the interval "
                  f"{interval} ({progress.message})")
    elif sink_type == "tablestore":
        reason = (f"{'rerun of ' if rerun else ''}the past interval {interval}: nothing to redo for the "
                  f"Tablestore sink, whose replica already holds later state ({progress.message})")
    elif not aligned(start, end, partition_by):
        reason = (f"the interval {interval} is not on {partition_by} boundaries, so no change-log partition "
                  "is rebuilt (only scheduled and backfill intervals are)")
    else:
        why = ("it began before the main tunnel's stream" if before_tunnel
               else "a rerun of a consumed interval")
        reason = (f"{interval}: {why}: its change-log partitions are rebuilt from a bounded Stream tunnel "
                  "(the main tunnel's progress is not touched)")
        branches.append(rebuild_task_id)
    return branches or [wait_task_id], reason


class TablestoreReplicationSinkBranchOperator(BaseBranchOperator):
    """Check a replication run's parameters together, then branch on its sink.

    A trigger form validates each parameter alone; this task fails at once (no retries) on a combination that
    cannot work (:func:`parameter_problems`), else follows ``tablestore_sink_task_id`` (the Tablestore sink
    needs its destination table first) or ``parquet_sink_task_id``.

    :param sink_type: ``tablestore`` or ``parquet``.
    :param parquet_path: the change log's root (required with the Parquet sink; an empty string when unset).
    :param source_table: the replicated table.
    :param destination_table: the replica (Tablestore sink).
    :param tablestore_conn_id: the source's connection.
    :param sink_tablestore_conn_id: the replica's connection.
    :param tablestore_sink_task_id: the branch of the Tablestore sink.
    :param parquet_sink_task_id: the branch of the Parquet sink.
    """

    template_fields: Sequence[str] = ("sink_type", "parquet_path", "source_table", "destination_table",
                                      "tablestore_conn_id", "sink_tablestore_conn_id")

    def __init__(self, *, sink_type: str, parquet_path: str | None, source_table: str, destination_table: str,
                 tablestore_conn_id: str = DEFAULT_CONN_ID, sink_tablestore_conn_id: str = DEFAULT_CONN_ID,
                 tablestore_sink_task_id: str, parquet_sink_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_task_ids(tablestore_sink_task_id=tablestore_sink_task_id, parquet_sink_task_id=parquet_sink_task_id)
        self.sink_type = sink_type
        self.parquet_path = parquet_path
        self.source_table = source_table
        self.destination_table = destination_table
        self.tablestore_conn_id = tablestore_conn_id
        self.sink_tablestore_conn_id = sink_tablestore_conn_id
        self.tablestore_sink_task_id = tablestore_sink_task_id
        self.parquet_sink_task_id = parquet_sink_task_id

    def choose_branch(self, context: Context) -> str:
        with fail_fast():
            check_choice("sink_type", self.sink_type, SINK_TYPES)
            check_table_name("source_table", self.source_table)
            if self.sink_type == "tablestore":
                check_table_name("destination_table", self.destination_table)
            check_non_empty("tablestore_conn_id", self.tablestore_conn_id)
            check_non_empty("sink_tablestore_conn_id", self.sink_tablestore_conn_id)
        problems = parameter_problems(
            sink_type=self.sink_type, parquet_path=self.parquet_path, source_table=self.source_table,
            destination_table=self.destination_table, tablestore_conn_id=self.tablestore_conn_id,
            sink_tablestore_conn_id=self.sink_tablestore_conn_id)
        if problems:
            raise AirflowFailException("invalid parameters: " + "; ".join(problems))
        return self.tablestore_sink_task_id if self.sink_type == "tablestore" else self.parquet_sink_task_id


class TablestoreReplicationPlanOperator(BaseBranchOperator, TablestoreHookMixin[TablestoreTunnelHook]):
    """Read the replication tunnel and branch to this run's work (:func:`plan_branches`).

    The run's cutoff is its data interval's end (``run_after`` without a logical date). A missing tunnel or
    wrong credentials fail the task at once.

    :param table_name: the source table.
    :param tunnel_name: the replication's BaseAndStream tunnel on it.
    :param sink_type: ``tablestore`` or ``parquet``.
    :param partition_by: the change log's partitioning (``hour`` or ``day``).
    :param full_phase_task_id: the full phase's task.
    :param incremental_phase_task_id: the incremental phase's task.
    :param rebuild_task_id: the first task of a past interval's rebuild.
    :param wait_task_id: the task that follows when there is nothing to run.
    :param tablestore_conn_id: the source's connection.
    :param region: overrides the connection's region.
    :return: (XCom ``branches``) the chosen task ids.
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "sink_type")

    def __init__(self, *, table_name: str, tunnel_name: str, sink_type: str, partition_by: str = "hour",
                 full_phase_task_id: str, incremental_phase_task_id: str, rebuild_task_id: str,
                 wait_task_id: str, tablestore_conn_id: str = DEFAULT_CONN_ID, region: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_choice("partition_by", partition_by, PARTITIONINGS)
        _check_task_ids(full_phase_task_id=full_phase_task_id, incremental_phase_task_id=incremental_phase_task_id,
                        rebuild_task_id=rebuild_task_id, wait_task_id=wait_task_id)
        self._init_connection(tablestore_conn_id, region)
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.sink_type = sink_type
        self.partition_by = partition_by
        self.task_ids = {"full_phase_task_id": full_phase_task_id,
                         "incremental_phase_task_id": incremental_phase_task_id,
                         "rebuild_task_id": rebuild_task_id, "wait_task_id": wait_task_id}

    def choose_branch(self, context: Context) -> list[str]:
        from airflow_tablestore.client.epoch import to_ns
        from airflow_tablestore.client.errors import NotFoundError, TunnelExpiredError
        from airflow_tablestore.client.tunnel.consume_point import tunnel_problem_message
        from airflow_tablestore.client.tunnel.cutoff import consumed_through, full_phase_done

        cutoff = context.get("data_interval_end") or context["dag_run"].run_after
        with fail_fast():
            check_table_name("table_name", self.table_name)
            check_non_empty("tunnel_name", self.tunnel_name)
            check_choice("sink_type", self.sink_type, SINK_TYPES)
        with self.make_hook() as hook, fail_fast():  # a wrong secret or a missing tunnel: no retries
            try:
                description = hook.conn.describe_tunnel(self.table_name, self.tunnel_name)
            except (NotFoundError, TunnelExpiredError) as err:  # say what to do about the tunnel itself
                raise AirflowFailException(tunnel_problem_message(err, self.table_name, self.tunnel_name)) from err
        branches, reason = plan_branches(
            full_done=full_phase_done(description), progress=consumed_through(description, to_ns(cutoff)),
            sink_type=self.sink_type, start=context.get("data_interval_start"),
            end=context.get("data_interval_end"), try_number=context["ti"].try_number,
            run_type=str(context["dag_run"].run_type),
            stream_start_ns=description.tunnel.stream_start_ns or description.tunnel.create_time_ns,
            partition_by=self.partition_by, **self.task_ids)
        self.log.info("%s -> %s", reason, ", ".join(branches))
        # Skipping the other branches ends the task before its return value is pushed: push the plan for
        # tasks that check it (TablestoreCreateRebuildTunnelOperator).
        context["ti"].xcom_push(key=PLAN_XCOM_KEY, value=branches)
        return branches


class TablestoreAnnounceReplicationOperator(BaseOperator):
    """Add an Asset event for what a replication run brought up to date, to an ``AssetAlias``.

    The Asset is the destination table ``tablestore://<instance>/<table>`` (Tablestore sink) or each
    change-log partition of the run's interval (Parquet sink; the change log's root without an interval).
    The event's extra holds the interval, the records the phases wrote and how far the replica reaches (from
    the phase tasks' summaries). Schedule downstream DAGs on the alias or on the concrete Asset.

    :param sink_type: ``tablestore`` or ``parquet``.
    :param destination_table: the replica (Tablestore sink).
    :param parquet_path: the change log's root (Parquet sink).
    :param partition_by: the change log's partitioning (``hour`` or ``day``).
    :param phase_task_ids: the Spark tasks whose summaries count, in order.
    :param asset_alias: the alias the events are added to (the task's outlet).
    :param sink_tablestore_conn_id: the replica's connection (names its instance).
    :return: (XCom) ``{"assets": [uri, ...], "interval_start", "interval_end", "records",
        "replicated_through"}``.
    """

    template_fields: Sequence[str] = ("sink_type", "destination_table", "parquet_path",
                                      "sink_tablestore_conn_id")

    def __init__(self, *, sink_type: str, destination_table: str, parquet_path: str | None,
                 partition_by: str = "hour", phase_task_ids: Sequence[str],
                 asset_alias: str = DEFAULT_ASSET_ALIAS, sink_tablestore_conn_id: str = DEFAULT_CONN_ID,
                 **kwargs: Any) -> None:
        check_choice("partition_by", partition_by, PARTITIONINGS)
        check_non_empty("asset_alias", asset_alias)
        if isinstance(phase_task_ids, str) or not all(isinstance(t, str) and t for t in phase_task_ids):
            raise ValueError(f"phase_task_ids must be a list of task ids, got {phase_task_ids!r}")
        super().__init__(outlets=[AssetAlias(asset_alias)], **kwargs)
        self.sink_type = sink_type
        self.destination_table = destination_table
        self.parquet_path = parquet_path
        self.partition_by = partition_by
        self.phase_task_ids = list(phase_task_ids)
        self.asset_alias = asset_alias
        self.sink_tablestore_conn_id = sink_tablestore_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        with fail_fast():
            check_choice("sink_type", self.sink_type, SINK_TYPES)
            if self.sink_type == "tablestore":
                check_table_name("destination_table", self.destination_table)
            elif not (self.parquet_path or "").strip():
                raise ValueError("the Parquet sink needs 'Change-log path' (parquet_path)")
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        summaries = [context["ti"].xcom_pull(task_ids=task_id) for task_id in self.phase_task_ids]
        summaries = [s for s in summaries if isinstance(s, dict)]
        extra: dict[str, Any] = {
            "interval_start": start.isoformat() if start else None,
            "interval_end": (end or context["dag_run"].run_after).isoformat(),
            "records": sum(int(s.get("records", 0)) for s in summaries),
            "replicated_through": next((s["consume_point"] for s in reversed(summaries)
                                        if s.get("consume_point")), None),
        }
        assets = self._assets(start, end)
        for asset in assets:
            context["outlet_events"][AssetAlias(self.asset_alias)].add(asset, extra=extra)
        return {"assets": [a.uri for a in assets], **extra}

    def _assets(self, start: datetime | None, end: datetime | None) -> list[Asset]:
        if self.sink_type == "tablestore":
            with fail_fast():  # a connection that is missing or malformed
                instance = TablestoreHook(self.sink_tablestore_conn_id).get_config().instance_name
            return [create_asset(instance=instance, table=self.destination_table)]
        root = (self.parquet_path or "").rstrip("/")
        root = root if "://" in root else "file://" + os.path.abspath(root)
        partitions = interval_partitions(start, end, self.partition_by) if start and end else []
        return [Asset(uri=f"{root}/interval={p}") for p in partitions] or [Asset(uri=root)]
