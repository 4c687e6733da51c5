"""Replicate a Tablestore table through its tunnel with Spark: base data once, then every hour's changes.

Copy this DAG and adjust the defaults (or set them per run in the trigger form). The schedule is hourly; each
run covers the hour before it (``CronTriggerTimetable`` with ``interval=1h``): the run at H is the interval
[H-1h, H) and replicates through H. A manual run with a logical date T covers [T-1h, T) (through T, i.e. "now"
from the trigger dialog); a run without a logical date replicates through its ``run_after``. Each run:

1. ``choose_sink`` — checks the parameters together (the form checks them one by one) and picks the branch:
   a Tablestore sink needs the destination table; a Parquet sink does not.
2. ``create_destination_table`` — a replica of the source's schema with ``max_time_deviation`` raised so
   original cell versions can be written (idempotent).
3. ``create_tunnel`` — a BaseAndStream tunnel on the source (idempotent by name).
4. ``plan`` — reads the tunnel: runs the full phase only while base data is left, skips the Spark job when the
   consume point already reached the cutoff, and sends a *rerun* (a cleared task or a backfill) of a past
   interval to the rebuild branch (Parquet sink) or logs why it is a no-op (Tablestore sink).
5. ``full_phase`` / ``incremental_phase`` — ``spark-submit`` of ``airflow_tablestore/spark/consumer.py``;
   the incremental cutoff is the run's ``data_interval_end`` (``run_after`` for runs without a logical date).
6. ``rebuild_prepare`` / ``rebuild_interval`` / ``rebuild_swap`` — a rerun of a past interval with the Parquet
   sink: a Stream tunnel bounded to [start, end), consumed into a staging directory, whose partitions then
   replace the interval's (the main tunnel is not touched; outside the stream retention it fails and changes
   nothing).
7. ``wait_consume_point`` — the tunnel consume point is at or past the same cutoff.
8. ``announce`` — an Asset event on ``AssetAlias("tablestore_replication")`` for the destination: the table
   ``tablestore://<instance>/<table>`` or the interval's change-log partition, with the interval, the records
   written and how far the replica reaches.

What a successful run guarantees: the Tablestore replica is *replicated through at least* the interval's end
(a run may read further; the task log says "replicated through T, cutoff C"); the Parquet change log is
partitioned by commit hour (``interval=YYYYMMDDTHH``), and the partition of [H-1, H) holds exactly the changes
committed in that hour once the run of that interval succeeded.

Credentials reach the Spark driver in a file readable only by the worker's user (``--credentials-file``, written
from the connections at run time and deleted afterwards), never as arguments, Spark conf or env_vars. Unpausing
starts from the current interval (``catchup=False``): the full phase copies the whole table anyway. Set
``TABLESTORE_REPLICATION_CATCHUP=true`` (and ``TABLESTORE_REPLICATION_START_DATE``, an ISO date) to have the
scheduler create the past intervals' runs. At most one Spark consumer of the main tunnel runs at a time, across
all runs of this DAG, backfills included (``max_active_tis_per_dag=1``), earlier intervals first.

Failures that no retry can fix (wrong credentials, a missing table or tunnel, an expired tunnel, a sink that is
the source, bad settings) fail the task at once (``AirflowFailException``); throttling, timeouts and 5xx are
retried.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, AssetAlias, Param, task
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_tablestore.operators.spark_submit import CONSUMER_APPLICATION as APPLICATION
from airflow_tablestore.operators.spark_submit import TablestoreSparkSubmitOperator
from airflow_tablestore.operators.table import TablestoreCreateTableOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

log = logging.getLogger("airflow.task")
# Spark at WARN in the task log (about 80 start-up INFO lines otherwise); the driver runs on the worker (client mode)
SPARK_LOG4J = os.path.join(os.path.dirname(APPLICATION), "log4j2.properties")
START_DATE = datetime.fromisoformat(os.environ.get("TABLESTORE_REPLICATION_START_DATE", "2026-11-01T00:00:00+00:00"))
# Runs without a logical date (a REST trigger with "logical_date": null) have no data interval: the template
# must not touch data_interval_end then (Airflow renders with StrictUndefined), so test it with `is defined`.
CUTOFF = ("{{ (data_interval_end if data_interval_end is defined and data_interval_end else dag_run.run_after)"
          ".isoformat() }}")
ASSET_ALIAS = "tablestore_replication"
"""Every successful run adds an Asset event to this alias for what it brought up to date: the destination table
``tablestore://<instance>/<table>`` or the change-log partition of its interval. Schedule downstream DAGs on
``AssetAlias("tablestore_replication")`` or on the concrete Asset."""
CATCHUP = os.environ.get("TABLESTORE_REPLICATION_CATCHUP", "false").lower() in ("1", "true", "yes")


def _spark_env() -> dict[str, str]:
    """No credentials here: on YARN/Kubernetes env_vars become --conf arguments (process lists, Spark UI)."""
    # Local/client mode: the driver and executors use the worker's interpreter (it has this package).
    return {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}


PARTITION_BY = "hour"
"""The Parquet change log's partitions follow the schedule (hourly): interval=YYYYMMDDTHH by commit time, so
the run of an hour leaves that hour's partition exact however far it read."""


def parameter_problems(params: dict[str, Any]) -> list[str]:
    """What is wrong with a combination of parameters (each is valid on its own), as readable sentences."""
    problems = []
    if params["sink_type"] == "parquet" and not (params.get("parquet_path") or "").strip():
        problems.append("the Parquet sink needs 'Change-log path' (parquet_path)")
    same_table = params["destination_table"] == params["source_table"]
    if params["sink_type"] == "tablestore" and same_table and \
            params["sink_tablestore_conn_id"] == params["tablestore_conn_id"]:
        problems.append("the destination table is the source table on the same connection: replicating into it "
                        "would feed its own stream; choose another table or destination connection")
    return problems


def plan_branches(*, full_done: bool, progress: Any, sink_type: str, start: datetime | None, end: datetime | None,
                  try_number: int, run_type: str, stream_start_ns: int) -> tuple[list[str], str]:
    """The ``plan`` task's decision: the branches to follow and why.

    The full phase while base data is left, else the incremental phase until the tunnel is consumed through the
    cutoff. With the Parquet sink, an hourly interval is rebuilt from a bounded tunnel (after the phases) when
    the run is a rerun of an interval already consumed (a cleared or retried task, a backfill) or when the
    interval began before the main tunnel's stream (its earlier changes reached the sink as base data). With the
    Tablestore sink a rerun of a consumed interval is a no-op: the replica already holds later state.
    """
    from airflow_tablestore.client.epoch import to_ns
    from airflow_tablestore.spark.parquet_sink import aligned

    branches = [] if full_done and progress.done else ["full_phase" if not full_done else "incremental_phase"]
    rerun = try_number > 1 or run_type == "backfill"
    before_tunnel = bool(start and stream_start_ns and to_ns(start) < stream_start_ns)
    reason = progress.message
    redo = start is not None and end is not None and (before_tunnel or (rerun and progress.done))
    if not redo or start is None or end is None:
        pass  # the phases (or nothing) do this run's work
    elif sink_type == "tablestore":
        reason = (f"{'rerun of ' if rerun else ''}the past interval [{start.isoformat()}, {end.isoformat()}): nothing "
                  f"to redo for the Tablestore sink, whose replica already holds later state ({progress.message})")
    elif not aligned(start, end, PARTITION_BY):
        reason = (f"the interval [{start.isoformat()}, {end.isoformat()}) is not on {PARTITION_BY} boundaries, so "
                  "no change-log partition is rebuilt (only scheduled and backfill intervals are)")
    else:
        why = "it began before the main tunnel's stream" if before_tunnel else "a rerun of a consumed interval"
        reason = (f"[{start.isoformat()}, {end.isoformat()}): {why}: its change-log partitions are rebuilt from a "
                  "bounded Stream tunnel (the main tunnel's progress is not touched)")
        branches.append("rebuild_prepare")
    return branches or ["wait_consume_point"], reason


def outside_retention(start: datetime, end: datetime, retention_hours: int, now: datetime) -> str | None:
    """Why [start, end) cannot be re-exported from the stream (it begins before the oldest change the table's
    stream still holds), or None."""
    oldest = now - timedelta(hours=retention_hours)
    if start >= oldest:
        return None
    return (f"the interval [{start.isoformat()}, {end.isoformat()}) starts before the oldest change the table's "
            f"stream still holds ({oldest.isoformat()}, retention {retention_hours} h): its changes cannot be read "
            "again; the change log is left as it was")


def _consumer_args(phase: str) -> list[str]:
    args = [
        "--table", "{{ params.source_table }}",
        "--tunnel", "{{ params.tunnel_name }}",
        "--phase", phase,
        "--sink", "{{ params.sink_type }}",
        "--sink-table", "{{ params.destination_table }}",
        "--sink-path", "{{ params.parquet_path }}",
        "--records-per-channel", "{{ params.records_per_channel }}",
        "--heartbeat-interval", "{{ params.heartbeat_interval }}",
        "--partition-by", PARTITION_BY,
    ]
    if phase == "incremental":
        args += ["--cutoff", CUTOFF]
    return args


with DAG(
    dag_id="tablestore_replication",
    description="Tablestore → Tablestore/Parquet replication through a tunnel, with Spark",
    schedule=CronTriggerTimetable("0 * * * *", timezone="UTC", interval=timedelta(hours=1)),
    start_date=START_DATE,
    catchup=CATCHUP,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    params={
        "tablestore_conn_id": Param("tablestore_default", type="string", minLength=1, title="Source connection",
                                    description="Airflow connection (type tablestore) of the source instance"),
        "sink_tablestore_conn_id": Param("tablestore_default", type="string", minLength=1,
                                         title="Destination connection",
                                         description="Airflow connection of the destination instance "
                                                     "(Tablestore sink only; may be the source's)"),
        "spark_conn_id": Param("spark_default", type="string", minLength=1, title="Spark connection",
                               description="Airflow connection (type spark) naming the Spark master"),
        "source_table": Param("source_table", type="string", minLength=1, title="Source table",
                              description="the table to replicate (its stream must be enabled)"),
        "destination_table": Param("replica_table", type="string", minLength=1, title="Destination table",
                                   description="created from the source's schema if missing (Tablestore sink "
                                               "only); must differ from the source table on the same instance"),
        "tunnel_name": Param("replication", type="string", minLength=1, title="Tunnel name",
                             description="BaseAndStream tunnel on the source table, created if missing; its "
                                         "server-side checkpoints are the replication's progress"),
        "sink_type": Param("tablestore", enum=["tablestore", "parquet"], title="Sink",
                           description="tablestore: replicate into the destination table; parquet: write a "
                                       "change log"),
        "parquet_path": Param(None, type=["null", "string"], title="Change-log path",
                              description="directory or URI of the Parquet change log: required with the "
                                          "Parquet sink, ignored with the Tablestore sink"),
        "records_per_channel": Param(50000, type="integer", minimum=1, title="Records per channel and round",
                                     description="the most records one Spark task reads from a channel per "
                                                 "round (memory per task)"),
        "heartbeat_interval": Param(5, type="number", exclusiveMinimum=0, title="Heartbeat interval (s)",
                                    description="seconds between the consumer's tunnel heartbeats"),
    },
    tags=["tablestore", "spark", "replication"],
    doc_md=__doc__,
) as dag:

    @task.branch
    def choose_sink(params: dict[str, Any] | None = None) -> str:
        """Check the parameters together (the trigger form validates each one alone), then branch: a Tablestore
        sink needs the destination table first."""
        from airflow.sdk.exceptions import AirflowFailException

        assert params is not None
        problems = parameter_problems(params)
        if problems:
            raise AirflowFailException("invalid parameters: " + "; ".join(problems))
        return "create_destination_table" if params["sink_type"] == "tablestore" else "create_tunnel"

    create_destination_table = TablestoreCreateTableOperator(
        task_id="create_destination_table",
        table_name="{{ params.destination_table }}",
        source_table="{{ params.source_table }}",
        source_tablestore_conn_id="{{ params.tablestore_conn_id }}",
        tablestore_conn_id="{{ params.sink_tablestore_conn_id }}",
    )

    create_tunnel = TablestoreCreateTunnelOperator(
        task_id="create_tunnel",
        table_name="{{ params.source_table }}",
        tunnel_name="{{ params.tunnel_name }}",
        tunnel_type="BaseAndStream",
        tablestore_conn_id="{{ params.tablestore_conn_id }}",
        trigger_rule="none_failed_min_one_success",
    )

    @task.branch
    def plan(params: dict[str, Any] | None = None, **context: Any) -> list[str]:
        """Read the tunnel and pick the branches (see :func:`plan_branches`)."""
        from airflow_tablestore.client.epoch import to_ns
        from airflow_tablestore.client.progress import consumed_through, full_phase_done
        from airflow_tablestore.hooks.failures import fail_fast
        from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

        assert params is not None

        cutoff = context.get("data_interval_end") or context["dag_run"].run_after
        hook = TablestoreTunnelHook(params["tablestore_conn_id"])
        try:
            with fail_fast():  # a wrong secret or a missing tunnel: no retries
                desc = hook.conn.describe_tunnel(params["source_table"], params["tunnel_name"])
        finally:
            hook.close()
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        branches, reason = plan_branches(
            full_done=full_phase_done(desc), progress=consumed_through(desc, to_ns(cutoff)),
            sink_type=params["sink_type"], start=start, end=end, try_number=context["ti"].try_number,
            run_type=str(context["dag_run"].run_type),
            stream_start_ns=desc.tunnel.stream_start_ns or desc.tunnel.create_time_ns)
        log.info("%s -> %s", reason, ", ".join(branches))
        context["ti"].xcom_push(key="branches", value=branches)  # rebuild_prepare reads it (see there)
        return branches

    @task(trigger_rule="none_failed_min_one_success")
    def rebuild_prepare(params: dict[str, Any] | None = None, **context: Any) -> dict[str, str]:
        """Create a Stream tunnel bounded to [start, end) for the rerun, after checking the interval is still
        in the table's stream retention (otherwise fail at once, leaving the partition as it was).

        Downstream of ``incremental_phase`` too (a rebuild swaps partitions only after the main tunnel wrote into
        them), so Airflow's branching does not skip it when only that phase was chosen: it skips itself unless
        ``plan`` chose it."""
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from airflow_tablestore.hooks.failures import fail_fast
        from airflow_tablestore.hooks.table import TablestoreHook
        from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

        assert params is not None
        if "rebuild_prepare" not in (context["ti"].xcom_pull(task_ids="plan", key="branches") or []):
            raise AirflowSkipException("plan did not choose a rebuild for this run")
        start, end = context["data_interval_start"], context["data_interval_end"]
        tables = TablestoreHook(params["tablestore_conn_id"])
        tunnels = TablestoreTunnelHook(params["tablestore_conn_id"])
        try:
            with fail_fast():
                stream = tables.conn.describe_table(params["source_table"]).schema.stream
                problem = outside_retention(start, end, stream.expiration_hours if stream else 0, datetime.now(UTC))
                if problem:
                    raise AirflowFailException(problem)
                name = f"{params['tunnel_name']}-rebuild-{start:%Y%m%dT%H%M%S}"
                if any(t.tunnel_name == name for t in tunnels.conn.list_tunnels(params["source_table"])):
                    tunnels.conn.delete_tunnel(params["source_table"], name)  # left by an earlier attempt
                tunnels.conn.create_tunnel(params["source_table"], name, "Stream", stream_start=start,
                                           stream_end=end)
        finally:
            tables.close()
            tunnels.close()
        staging = f"{params['parquet_path'].rstrip('/')}/_rebuild/{start:%Y%m%dT%H%M%S}"
        log.info("rebuild tunnel %s created for [%s, %s); the rebuilt partitions are written to %s first", name,
                 start.isoformat(), end.isoformat(), staging)
        return {"tunnel": name, "staging": staging}

    @task
    def rebuild_swap(params: dict[str, Any] | None = None, **context: Any) -> list[str]:
        """Replace the interval's partitions by the rebuilt ones (a directory rename each: atomic on local and
        HDFS file systems), then delete the rebuild tunnel and the staging directory."""
        from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
        from airflow_tablestore.spark.parquet_sink import replace_partitions

        assert params is not None
        prepared = context["ti"].xcom_pull(task_ids="rebuild_prepare")
        start, end = context["data_interval_start"], context["data_interval_end"]
        replaced = replace_partitions(params["parquet_path"], prepared["staging"], start, end, PARTITION_BY)
        tunnels = TablestoreTunnelHook(params["tablestore_conn_id"])
        try:
            tunnels.conn.delete_tunnel(params["source_table"], prepared["tunnel"])
        finally:
            tunnels.close()
        log.info("rebuilt partitions %s of [%s, %s)", ", ".join(replaced), start.isoformat(), end.isoformat())
        return replaced

    common: dict[str, Any] = {
        "application": APPLICATION,
        "conn_id": "{{ params.spark_conn_id }}",
        "env_vars": _spark_env(),
        "tablestore_conn_id": "{{ params.tablestore_conn_id }}",
        "sink_tablestore_conn_id": "{{ params.sink_tablestore_conn_id }}",
        "conf": {"spark.speculation": "false", "spark.sql.sources.partitionOverwriteMode": "dynamic",
                 "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file://{SPARK_LOG4J}"},
        # One consumer of the tunnel at a time across all runs of this DAG, backfills included (Airflow 3.3 does
        # not apply max_active_runs to backfills, which start 10 runs by default); earlier intervals go first.
        "max_active_tis_per_dag": 1,
    }
    full_phase = TablestoreSparkSubmitOperator(
        task_id="full_phase",
        name="tablestore-{{ params.tunnel_name }}-full",
        application_args=_consumer_args("full"),
        **common,
    )
    rebuild_interval = TablestoreSparkSubmitOperator(
        task_id="rebuild_interval",
        name="tablestore-{{ params.tunnel_name }}-rebuild",
        application_args=[
            "--table", "{{ params.source_table }}",
            "--tunnel", "{{ ti.xcom_pull(task_ids='rebuild_prepare')['tunnel'] }}",
            "--phase", "incremental", "--cutoff", CUTOFF,
            "--sink", "parquet", "--sink-path", "{{ ti.xcom_pull(task_ids='rebuild_prepare')['staging'] }}",
            "--partition-by", PARTITION_BY,
            "--records-per-channel", "{{ params.records_per_channel }}",
            "--heartbeat-interval", "{{ params.heartbeat_interval }}",
        ],
        **common,
    )
    incremental_phase = TablestoreSparkSubmitOperator(
        task_id="incremental_phase",
        name="tablestore-{{ params.tunnel_name }}-incremental",
        application_args=_consumer_args("incremental"),
        trigger_rule="none_failed_min_one_success",
        **common,
    )
    wait_consume_point = TablestoreTunnelConsumePointSensor(
        task_id="wait_consume_point",
        table_name="{{ params.source_table }}",
        tunnel_name="{{ params.tunnel_name }}",
        cutoff=CUTOFF,
        tablestore_conn_id="{{ params.tablestore_conn_id }}",
        poke_interval=10,
        timeout=3600,
        trigger_rule="none_failed_min_one_success",
    )

    @task(outlets=[AssetAlias(ASSET_ALIAS)], trigger_rule="none_failed_min_one_success")
    def announce(params: dict[str, Any] | None = None, **context: Any) -> dict[str, Any]:
        """One Asset event per successful interval: the destination (table, or the interval's change-log
        partition) with the interval, the records this run wrote and how far the replica now reaches."""
        from airflow_tablestore.assets.tablestore import create_asset
        from airflow_tablestore.hooks.base import TablestoreBaseHook
        from airflow_tablestore.spark.parquet_sink import interval_partitions

        assert params is not None
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        cutoff = end or context["dag_run"].run_after
        summaries = [context["ti"].xcom_pull(task_ids=t) for t in ("full_phase", "incremental_phase")]
        extra: dict[str, Any] = {
            "interval_start": start.isoformat() if start else None,
            "interval_end": cutoff.isoformat(),
            "records": sum(int(s.get("records", 0)) for s in summaries if isinstance(s, dict)),
            "replicated_through": next((s.get("consume_point") for s in reversed(summaries)
                                        if isinstance(s, dict) and s.get("consume_point")), None),
        }
        if params["sink_type"] == "tablestore":
            instance = TablestoreBaseHook(params["sink_tablestore_conn_id"]).get_config().instance_name
            assets = [create_asset(instance=instance, table=params["destination_table"])]
        else:
            root = params["parquet_path"].rstrip("/")
            root = root if "://" in root else "file://" + os.path.abspath(root)
            parts = interval_partitions(start, end, PARTITION_BY) if start and end else []
            assets = [Asset(uri=f"{root}/interval={p}") for p in parts] or [Asset(uri=root)]
        for asset in assets:
            context["outlet_events"][AssetAlias(ASSET_ALIAS)].add(asset, extra=extra)
        return {"assets": [a.uri for a in assets], **extra}

    sink_choice = choose_sink()
    sink_choice >> [create_destination_table, create_tunnel]
    create_destination_table >> create_tunnel
    planned = plan()
    rebuild = rebuild_prepare()
    create_tunnel >> planned >> [full_phase, incremental_phase, wait_consume_point, rebuild]
    incremental_phase >> rebuild  # a rebuild swaps partitions only after the main tunnel wrote into them
    rebuild >> rebuild_interval >> rebuild_swap() >> wait_consume_point
    full_phase >> incremental_phase >> wait_consume_point >> announce()
