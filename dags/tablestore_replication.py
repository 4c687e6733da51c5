"""Replicate a Tablestore table through its tunnel with Spark: base data once, then every interval's changes.

Copy this DAG and adjust the defaults (or set them per run in the trigger form). Each run:

1. ``choose_sink`` — a Tablestore sink needs the destination table; a Parquet sink does not.
2. ``create_destination_table`` — a replica of the source's schema with ``max_time_deviation`` raised so
   original cell versions can be written (idempotent).
3. ``create_tunnel`` — a BaseAndStream tunnel on the source (idempotent by name).
4. ``plan`` — reads the tunnel: runs the full phase only while base data is left, skips the Spark job when the
   consume point already reached the cutoff.
5. ``full_phase`` / ``incremental_phase`` — ``spark-submit`` of ``airflow_tablestore/spark/consumer.py``;
   the incremental cutoff is the run's ``data_interval_end``.
6. ``wait_consume_point`` — the tunnel consume point is at or past the same cutoff.

Credentials reach the Spark driver in a file readable only by the worker's user (``--credentials-file``, written
from the connections at run time and deleted afterwards), never as arguments, Spark conf or env_vars. Unpausing starts from the current
interval (``catchup=False``): the full phase copies the whole table anyway. Set
``TABLESTORE_REPLICATION_CATCHUP=true`` (and ``TABLESTORE_REPLICATION_START_DATE``, an ISO date) to have the
scheduler create the past intervals' runs; ``max_active_runs=1`` keeps scheduled runs in interval order.

Failures that no retry can fix (wrong credentials, a missing table or tunnel, an expired tunnel, a sink that is
the source, bad settings) fail the task at once (``AirflowFailException``); throttling, timeouts and 5xx are
retried.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param, task

from airflow_tablestore.operators.table import TablestoreCreateTableOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

CONSUMER = importlib.util.find_spec("airflow_tablestore.spark.consumer")
APPLICATION = CONSUMER.origin if CONSUMER and CONSUMER.origin else "airflow_tablestore/spark/consumer.py"
# Spark at WARN in the task log (about 80 start-up INFO lines otherwise); the driver runs on the worker (client mode)
SPARK_LOG4J = os.path.join(os.path.dirname(APPLICATION), "log4j2.properties")
START_DATE = datetime.fromisoformat(os.environ.get("TABLESTORE_REPLICATION_START_DATE", "2026-11-01T00:00:00+00:00"))
# Runs without a logical date (a REST trigger with "logical_date": null) have no data interval: the template
# must not touch data_interval_end then (Airflow renders with StrictUndefined), so test it with `is defined`.
CUTOFF = ("{{ (data_interval_end if data_interval_end is defined and data_interval_end else dag_run.run_after)"
          ".isoformat() }}")
CATCHUP = os.environ.get("TABLESTORE_REPLICATION_CATCHUP", "false").lower() in ("1", "true", "yes")


def _spark_env() -> dict[str, str]:
    """No credentials here: on YARN/Kubernetes env_vars become --conf arguments (process lists, Spark UI)."""
    # Local/client mode: the driver and executors use the worker's interpreter (it has this package).
    return {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}


class TablestoreSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` for the consumer: the Spark connection id can come from a param (templated); it
    fails at once, without retries, when the worker has no ``spark-submit`` or no Java, or when the consumer
    exits with a permanent error; and credentials never appear on a command line.

    Credentials: the source and sink connections are written to a JSON file readable only by the worker's user
    (in a private temporary directory, deleted when the task ends) and passed as ``--credentials-file``. In
    client and local mode the driver reads it where it is; in cluster deploy mode it travels with ``--files`` and
    the driver reads it from its working directory (on Kubernetes that needs ``spark.kubernetes.file.upload.path``;
    or mount a Secret and pass ``--credentials-file`` in ``application_args`` yourself). The executors receive
    the settings inside the job's closures, never through the Spark conf.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "_conn_id", "tablestore_conn_id",
                       "sink_tablestore_conn_id")

    def __init__(self, *, tablestore_conn_id: str, sink_tablestore_conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tablestore_conn_id = tablestore_conn_id
        self.sink_tablestore_conn_id = sink_tablestore_conn_id

    def _with_credentials(self, directory: str) -> None:
        """Write the credentials file into ``directory`` and point the job at it."""
        from airflow_tablestore.hooks.base import TablestoreBaseHook
        from airflow_tablestore.spark.settings import write_credentials_file

        source = TablestoreBaseHook(self.tablestore_conn_id).get_config()  # registers secrets with the masker
        sink = None
        if self.sink_tablestore_conn_id and self.sink_tablestore_conn_id != self.tablestore_conn_id:
            sink = TablestoreBaseHook(self.sink_tablestore_conn_id).get_config()
        path = write_credentials_file(directory, source, sink)
        if (self._deploy_mode or self._get_hook()._connection.get("deploy_mode")) == "cluster":
            self.files = ",".join(filter(None, [self.files, str(path)]))
            self.application_args = [*(self.application_args or []), "--credentials-file", path.name]
        else:
            self.application_args = [*(self.application_args or []), "--credentials-file", str(path)]

    def execute(self, context: Any) -> None:
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_tablestore.hooks.failures import fail_fast
        from airflow_tablestore.spark.consumer import PERMANENT_EXIT_CODES
        from airflow_tablestore.spark.preflight import spark_submit_problem

        try:  # the binary the hook will run (operator argument, else the connection's spark-binary extra)
            binary = self._get_hook()._connection["spark_binary"]
        except Exception:
            binary = getattr(self, "_spark_binary", None) or "spark-submit"
        problem = spark_submit_problem(binary)
        if problem:
            raise AirflowFailException(problem)
        try:
            with tempfile.TemporaryDirectory(prefix="tablestore-spark-") as private:  # mode 0700
                with fail_fast():  # a malformed Tablestore connection will not improve with retries
                    self._with_credentials(private)
                super().execute(context)
        except Exception as exc:
            code = re.search(r"Error code is: (\d+)", str(exc))
            if code and int(code.group(1)) in PERMANENT_EXIT_CODES:
                raise AirflowFailException(
                    f"the consumer stopped with a permanent error (exit code {code.group(1)}; its ERROR line above "
                    "says which): not retried, retrying cannot fix it") from exc
            raise


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
    ]
    if phase == "incremental":
        args += ["--cutoff", CUTOFF]
    return args


with DAG(
    dag_id="tablestore_replication",
    description="Tablestore → Tablestore/Parquet replication through a tunnel, with Spark",
    schedule="@hourly",
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
        "parquet_path": Param("/tmp/tablestore-changelog", type="string", minLength=1, title="Change-log path",
                              description="directory or URI of the Parquet change log (Parquet sink only; "
                                          "ignored otherwise)"),
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
        """A Tablestore sink needs the destination table first."""
        assert params is not None
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
    def plan(params: dict[str, Any] | None = None, **context: Any) -> str:
        """Full phase while base data is left; skip Spark when the consume point already passed the cutoff."""
        from airflow_tablestore.client.progress import consumed_through, full_phase_done
        from airflow_tablestore.client.tunnel import to_ns
        from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

        assert params is not None
        from airflow_tablestore.hooks.failures import fail_fast

        cutoff = context.get("data_interval_end") or context["dag_run"].run_after
        hook = TablestoreTunnelHook(params["tablestore_conn_id"])
        try:
            with fail_fast():  # a wrong secret or a missing tunnel: no retries
                desc = hook.conn.describe_tunnel(params["source_table"], params["tunnel_name"])
        finally:
            hook.close()
        if not full_phase_done(desc):
            return "full_phase"
        if not consumed_through(desc, to_ns(cutoff)).done:
            return "incremental_phase"
        return "wait_consume_point"

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

    sink_choice = choose_sink()
    sink_choice >> [create_destination_table, create_tunnel]
    create_destination_table >> create_tunnel
    planned = plan()
    create_tunnel >> planned >> [full_phase, incremental_phase, wait_consume_point]
    full_phase >> incremental_phase >> wait_consume_point
