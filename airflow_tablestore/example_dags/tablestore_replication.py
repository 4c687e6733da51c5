"""Replicate a Tablestore table through its tunnel with Spark: base data once, then every hour's changes.

Enable it with one line in your dags folder, ``from airflow_tablestore.example_dags.tablestore_replication
import dag``, or build it with your own defaults and DAG id: ``dag = replication_dag(source_table="orders")``
(the trigger form sets the parameters per run). Each hourly run covers the hour before it: ``choose_sink``
checks the parameters, ``create_destination_table`` and ``create_tunnel`` prepare (idempotent), ``plan`` reads
the tunnel and picks ``full_phase`` and/or ``incremental_phase`` (Spark jobs), or the ``rebuild_*`` steps for a
rerun of a past hour with the Parquet sink; ``wait_consume_point`` checks the tunnel reached the cutoff,
``verify_replica`` (opt-in: the ``verify_replica`` parameter) compares the replica with the source cell for
cell, and ``announce`` adds an Asset event to ``AssetAlias("tablestore_replication")``. Operating it (what a run
guarantees, reruns, backfills, catch-up, credentials): docs/airflow.md, "Operating the replication DAG".
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param, TriggerRule, XComArg, chain
from airflow.sdk.exceptions import ParamValidationError
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_tablestore.operators.rebuild import (
    TablestoreCreateRebuildTunnelOperator,
    TablestoreSwapRebuiltPartitionsOperator,
)
from airflow_tablestore.operators.replication import (
    PLACEHOLDERS,
    RUN_CUTOFF,
    TablestoreAnnounceReplicationOperator,
    TablestoreReplicationPlanOperator,
    TablestoreReplicationSinkBranchOperator,
)
from airflow_tablestore.operators.spark_submit import (
    CONSUMER_APPLICATION,
    CONSUMER_LOG4J_CONFIG,
    TablestoreSparkSubmitOperator,
    consumer_arguments,
)
from airflow_tablestore.operators.table import TablestoreCreateTableOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator
from airflow_tablestore.operators.verify import TablestoreVerifyReplicaOperator
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

DAG_ID = "tablestore_replication"
START_DATE = "2026-11-01T00:00:00+00:00"  # unless TABLESTORE_REPLICATION_START_DATE says otherwise
PARTITION_BY = "hour"  # the change log's partitions follow the schedule: interval=YYYYMMDDTHH
PLAN_TASK_ID = "plan"  # the branch task that plans the run (rebuild_prepare asks it whether it was chosen)


def _params() -> dict[str, Param]:
    """The DAG's parameters with their defaults (new Param objects on each call)."""
    return {
        "tablestore_conn_id": Param("tablestore_default", type="string", minLength=1,
                                    title="Source connection",
                                    description="Airflow connection (type tablestore) of the source "
                                                "instance"),
        "sink_tablestore_conn_id": Param("tablestore_default", type="string", minLength=1,
                                         title="Destination connection",
                                         description="Airflow connection of the destination instance "
                                                     "(Tablestore sink only; may be the source's)"),
        "spark_conn_id": Param("spark_default", type="string", minLength=1, title="Spark connection",
                               description="Airflow connection (type spark) naming the Spark master"),
        "source_table": Param(PLACEHOLDERS["source_table"], type="string", minLength=1, title="Source table",
                              description="the table to replicate (its stream must be enabled)"),
        "destination_table": Param(PLACEHOLDERS["destination_table"], type="string", minLength=1,
                                   title="Destination table",
                                   description="created from the source's schema if missing (Tablestore "
                                               "sink only); must differ from the source table on the same "
                                               "instance"),
        "tunnel_name": Param("replication", type="string", minLength=1, title="Tunnel name",
                             description="BaseAndStream tunnel on the source table, created if missing; its "
                                         "server-side checkpoints are the replication's progress"),
        "sink_type": Param("tablestore", enum=["tablestore", "parquet"], title="Sink",
                           description="tablestore: replicate into the destination table; parquet: write a "
                                       "change log"),
        "parquet_path": Param(None, type=["null", "string"], title="Change-log path",
                              description="directory or URI of the Parquet change log: required with the "
                                          "Parquet sink, ignored with the Tablestore sink"),
        "records_per_channel": Param(50000, type="integer", minimum=1, maximum=10_000_000,
                                     title="Records per channel and round",
                                     description="the most records one Spark task reads from a channel per "
                                                 "round (memory per task), 1 to 10,000,000"),
        "heartbeat_interval": Param(5, type="number", exclusiveMinimum=0, exclusiveMaximum=60,
                                    title="Heartbeat interval (s)",
                                    description="seconds between the consumer's tunnel heartbeats: above 0, "
                                                "below the consumer's 60 s client timeout"),
        "verify_replica": Param(False, type="boolean", title="Verify the replica",
                                description="after the run, compare the replica with the source cell for cell "
                                            "(every version; Tablestore sink) and fail if they differ. Exact only "
                                            "when nothing writes to the source after the run's cutoff (a "
                                            "migration's last run, a test): it reads both tables whole"),
    }


def _verification_wanted(params: dict[str, Any]) -> bool:
    """``verify_replica`` runs when asked for and there is a replica table (the Tablestore sink)."""
    return bool(params["verify_replica"]) and params["sink_type"] == "tablestore"


def replication_dag(dag_id: str = DAG_ID, *, start_date: datetime | None = None, catchup: bool | None = None,
                    auto_register: bool = True, **defaults: Any) -> DAG:
    """The replication DAG; ``defaults`` replace its parameters' defaults (checked against their schemas).

    ``dag = replication_dag(source_table="orders", sink_type="parquet", parquet_path="/data/orders")`` at the
    top level of a file in your dags folder; scheduled runs take these defaults. ``start_date`` and ``catchup``
    default to ``TABLESTORE_REPLICATION_START_DATE`` and ``TABLESTORE_REPLICATION_CATCHUP`` (else
    2026-11-01T00:00Z and no catch-up). ``auto_register=False``: the DAG counts only where a file binds it at
    its top level (as this module's ``dag``), not in every file that imports this module.
    """
    params = _params()
    for name, value in defaults.items():
        if name not in params:
            raise TypeError(f"replication_dag() got an unknown parameter {name!r}; it takes {sorted(params)}")
        try:
            params[name].resolve(value)  # checks the value against the parameter's schema, keeps it as default
        except ParamValidationError as err:
            raise ParamValidationError(f"replication_dag(): parameter {name!r}: {err}") from None
    if start_date is None:
        start_date = datetime.fromisoformat(os.environ.get("TABLESTORE_REPLICATION_START_DATE", START_DATE))
    if catchup is None:
        catchup = os.environ.get("TABLESTORE_REPLICATION_CATCHUP", "false").lower() in ("1", "true", "yes")

    with DAG(
        dag_id=dag_id,
        description="Tablestore → Tablestore/Parquet replication through a tunnel, with Spark",
        schedule=CronTriggerTimetable("0 * * * *", timezone="UTC", interval=timedelta(hours=1)),
        start_date=start_date,
        catchup=catchup,
        max_active_runs=1,
        default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
        params=params,
        auto_register=auto_register,
        tags=["tablestore", "spark", "replication"],
        doc_md=__doc__,
    ) as dag:
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
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )
        choose_sink = TablestoreReplicationSinkBranchOperator(
            task_id="choose_sink",
            sink_type="{{ params.sink_type }}",
            parquet_path="{{ params.parquet_path or '' }}",
            source_table="{{ params.source_table }}",
            destination_table="{{ params.destination_table }}",
            sink_tablestore_conn_id="{{ params.sink_tablestore_conn_id }}",
            tablestore_sink_task_id=create_destination_table.task_id,
            parquet_sink_task_id=create_tunnel.task_id,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )

        spark: dict[str, Any] = {
            "application": CONSUMER_APPLICATION,
            "conn_id": "{{ params.spark_conn_id }}",
            "sink_tablestore_conn_id": "{{ params.sink_tablestore_conn_id }}",
            # Local/client mode: the driver and executors use the worker's interpreter (it has this package). No
            # credentials in env_vars: on YARN/Kubernetes they become --conf arguments (process lists, Spark UI).
            "env_vars": {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)},
            "conf": {
                "spark.speculation": "false",
                "spark.sql.sources.partitionOverwriteMode": "dynamic",
                # Spark at WARN in the task log (the driver runs on the worker in client mode)
                "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file://{CONSUMER_LOG4J_CONFIG}",
            },
            # One consumer of the tunnel at a time across all runs of this DAG, backfills included (Airflow 3.3
            # does not apply max_active_runs to backfills, which start 10 runs by default); earlier runs first.
            "max_active_tis_per_dag": 1,
            "tablestore_conn_id": "{{ params.tablestore_conn_id }}",
        }
        consumer = {"table": "{{ params.source_table }}", "partition_by": PARTITION_BY,
                    "records_per_channel": "{{ params.records_per_channel }}",
                    "heartbeat_interval": "{{ params.heartbeat_interval }}"}
        main_tunnel = {"tunnel": "{{ params.tunnel_name }}", "sink": "{{ params.sink_type }}",
                       "sink_table": "{{ params.destination_table }}", "sink_path": "{{ params.parquet_path }}"}
        full_phase = TablestoreSparkSubmitOperator(
            task_id="full_phase",
            name="tablestore-{{ params.tunnel_name }}-full",
            application_args=consumer_arguments(phase="full", **consumer, **main_tunnel),
            **spark,
        )
        incremental_phase = TablestoreSparkSubmitOperator(
            task_id="incremental_phase",
            name="tablestore-{{ params.tunnel_name }}-incremental",
            application_args=consumer_arguments(phase="incremental", cutoff=RUN_CUTOFF, **consumer,
                                                **main_tunnel),
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
            **spark,
        )

        # A rerun of a past hour with the Parquet sink: read the hour again through a bounded tunnel of its own.
        # rebuild_prepare is downstream of incremental_phase too (partitions are swapped only after the main
        # tunnel wrote into them), so it skips itself unless plan chose it. Its XCom holds the bounded tunnel and
        # the staging change log (keys "tunnel" and "staging").
        rebuild_prepare = TablestoreCreateRebuildTunnelOperator(
            task_id="rebuild_prepare",
            table_name="{{ params.source_table }}",
            tunnel_name="{{ params.tunnel_name }}",
            parquet_path="{{ params.parquet_path }}",
            plan_task_id=PLAN_TASK_ID,
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )
        rebuild_tunnel, staging = XComArg(rebuild_prepare, key="tunnel"), XComArg(rebuild_prepare, key="staging")
        rebuild_interval = TablestoreSparkSubmitOperator(
            task_id="rebuild_interval",
            name="tablestore-{{ params.tunnel_name }}-rebuild",
            application_args=consumer_arguments(phase="incremental", cutoff=RUN_CUTOFF,
                                                tunnel=rebuild_tunnel, sink="parquet", sink_path=staging,
                                                **consumer),
            **spark,
        )
        rebuild_swap = TablestoreSwapRebuiltPartitionsOperator(
            task_id="rebuild_swap",
            table_name="{{ params.source_table }}",
            # templated fields: Airflow renders the XComArgs before execute (and draws the dependency)
            tunnel_name=rebuild_tunnel,  # type: ignore[arg-type]
            parquet_path="{{ params.parquet_path }}",
            staging_path=staging,  # type: ignore[arg-type]
            partition_by=PARTITION_BY,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )

        wait_consume_point = TablestoreTunnelConsumePointSensor(
            task_id="wait_consume_point",
            table_name="{{ params.source_table }}",
            tunnel_name="{{ params.tunnel_name }}",
            cutoff=RUN_CUTOFF,
            poke_interval=10,
            timeout=3600,
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )
        # Opt-in: a replica equals its source only when the source stopped changing before the run's cutoff (the
        # run replicates *through at least* the cutoff; changes after it may or may not have reached the replica).
        # Before announce, so an Asset event of a verifying run announces a verified replica.
        verification_wanted = ShortCircuitOperator(
            task_id="verification_wanted",
            python_callable=_verification_wanted,
            ignore_downstream_trigger_rules=False,  # skip verify_replica only; announce still runs
        )
        verify_replica = TablestoreVerifyReplicaOperator(
            task_id="verify_replica",
            source_table="{{ params.source_table }}",
            destination_table="{{ params.destination_table }}",
            sink_tablestore_conn_id="{{ params.sink_tablestore_conn_id }}",
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )
        # The branch tasks come after the tasks they choose from and name them by the task objects' ids.
        plan = TablestoreReplicationPlanOperator(
            task_id=PLAN_TASK_ID,
            table_name="{{ params.source_table }}",
            tunnel_name="{{ params.tunnel_name }}",
            sink_type="{{ params.sink_type }}",
            partition_by=PARTITION_BY,
            full_phase_task_id=full_phase.task_id,
            incremental_phase_task_id=incremental_phase.task_id,
            rebuild_task_id=rebuild_prepare.task_id,
            wait_task_id=wait_consume_point.task_id,
            tablestore_conn_id="{{ params.tablestore_conn_id }}",
        )
        announce = TablestoreAnnounceReplicationOperator(
            task_id="announce",
            sink_type="{{ params.sink_type }}",
            destination_table="{{ params.destination_table }}",
            parquet_path="{{ params.parquet_path }}",
            partition_by=PARTITION_BY,
            phase_task_ids=[full_phase.task_id, incremental_phase.task_id],
            asset_alias="tablestore_replication",
            sink_tablestore_conn_id="{{ params.sink_tablestore_conn_id }}",
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        )

        chain(choose_sink, [create_destination_table, create_tunnel])
        chain(create_destination_table, create_tunnel, plan,
              [full_phase, incremental_phase, rebuild_prepare, wait_consume_point])
        chain(full_phase, incremental_phase, [rebuild_prepare, wait_consume_point])
        chain(rebuild_prepare, rebuild_interval, rebuild_swap, wait_consume_point, announce)
        chain(wait_consume_point, verification_wanted, verify_replica, announce)
    return dag


#: The DAG with the defaults above, for the one line in your dags folder. Not auto-registered: a file that
#: imports only :func:`replication_dag` gets just the DAG it builds.
dag = replication_dag(auto_register=False)
