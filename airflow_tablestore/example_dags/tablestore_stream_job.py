"""Stream a Tablestore table's changes into Parquet files on the DAG's schedule, one incremental batch a run.

Enable it with one line in your dags folder: ``from airflow_tablestore.example_dags.tablestore_stream_job import
dag``. ``create_tunnel`` makes the table's BaseAndStream tunnel (idempotent); ``stream_changes`` submits the
packaged ``jobs/tablestore_stream_changes.py`` with ``spark-submit``: a ``spark.readStream.format("tablestore")``
query with ``trigger(availableNow=True)`` that appends to the output path every change of the tunnel that its
checkpoint location has not seen (the base data on the first run, then the stream), and stops. So each hourly
run appends what changed since the run before, and each change lands once (docs/spark.md, "An example: a
streaming job on the DAG's schedule"). One run at a time: a checkpoint location belongs to one query. The
Tablestore connection reaches the job as ``--credentials-file``, never on a command line.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, Param, chain

from airflow_tablestore.example_dags.jobs import job_path
from airflow_tablestore.operators.spark_submit import CONSUMER_LOG4J_CONFIG, TablestoreSparkSubmitOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator

JOB = job_path("tablestore_stream_changes")
DATA_DIR = os.path.join(os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "tablestore_stream")
"""Where the output and the checkpoint go by default: ``$AIRFLOW_HOME/tablestore_stream`` (a local directory,
for a single machine; give paths every Spark node sees, such as ``s3a://`` or HDFS, on a cluster)."""

with DAG(
    dag_id="tablestore_stream_job",
    description="A table's changes appended to Parquet files by a Spark streaming query, once per hour",
    schedule="@hourly",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,  # one query per checkpoint location at a time
    params={
        "table": Param("orders", type="string", minLength=1, title="Table",
                       description="the table whose changes are streamed"),
        "tunnel_name": Param("orders_changes", type="string", minLength=1, title="Tunnel name",
                             description="its BaseAndStream tunnel, created if missing"),
        "output_path": Param(os.path.join(DATA_DIR, "changes"), type="string", minLength=1, title="Output path",
                             description="the Parquet directory the changes are appended to (change-log schema)"),
        "checkpoint_path": Param(os.path.join(DATA_DIR, "checkpoint"), type="string", minLength=1,
                                 title="Checkpoint location",
                                 description="the streaming query's checkpoint: keep it with the output path; "
                                             "a new table or tunnel needs a new one"),
        "max_records_per_trigger": Param(0, type="integer", minimum=0, title="Records per micro-batch",
                                         description="at most this many changes per micro-batch (0: no limit)"),
    },
    tags=["tablestore", "spark", "streaming", "example"],
    doc_md=__doc__,
    # Not auto-registered (like the other example DAGs): it counts only in a file that binds it at its top level,
    # as the one line does, not in every dags file that imports something else from this module.
    auto_register=False,
) as dag:
    create_tunnel = TablestoreCreateTunnelOperator(
        task_id="create_tunnel",
        table_name="{{ params.table }}",
        tunnel_name="{{ params.tunnel_name }}",
    )
    stream_changes = TablestoreSparkSubmitOperator(
        task_id="stream_changes",
        application=JOB,
        application_args=["--table", "{{ params.table }}", "--tunnel", "{{ params.tunnel_name }}",
                          "--output", "{{ params.output_path }}", "--checkpoint", "{{ params.checkpoint_path }}",
                          "--max-records-per-trigger", "{{ params.max_records_per_trigger }}"],
        conf={"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file://{CONSUMER_LOG4J_CONFIG}"},
        tablestore_conn_id="tablestore_default",
        sink_tablestore_conn_id="tablestore_default",
    )
    chain(create_tunnel, stream_changes)
