"""Run your own PySpark job on Tablestore tables: read a table, aggregate it, write the result to another table.

Enable it with one line in your dags folder: ``from airflow_tablestore.example_dags.tablestore_spark_job import
dag``. ``create_result_table`` makes the result table (idempotent); ``aggregate`` submits the packaged
``jobs/tablestore_aggregate.py`` with ``spark-submit`` (for your own job, copy this DAG and point
``application`` at your file). The job reads and writes with ``format("tablestore")`` (docs/spark.md,
"Tablestore as a Spark data source"); the Tablestore connection reaches it as ``--credentials-file``, never on
a command line.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, chain

from airflow_tablestore.example_dags.jobs import job_path
from airflow_tablestore.operators.spark_submit import CONSUMER_LOG4J_CONFIG, TablestoreSparkSubmitOperator
from airflow_tablestore.operators.table import TablestoreCreateTableOperator

JOB = job_path("tablestore_aggregate")

with DAG(
    dag_id="tablestore_spark_job",
    description="A user's PySpark job reading and writing Tablestore tables",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    params={
        "source_table": Param("orders", type="string", minLength=1, title="Source table",
                              description="a table with a STRING column 'shop' and a DOUBLE column 'amount'"),
        "result_table": Param("order_totals", type="string", minLength=1, title="Result table",
                              description="created if missing: shop (primary key), total, orders"),
    },
    tags=["tablestore", "spark", "example"],
    doc_md=__doc__,
    # Not auto-registered (like the replication DAG): it counts only in a file that binds it at its top level, as
    # the one line does, not in every dags file that imports something else from this module.
    auto_register=False,
) as dag:
    create_result_table = TablestoreCreateTableOperator(
        task_id="create_result_table",
        table_name="{{ params.result_table }}",
        primary_key=[("shop", "STRING")],
        defined_columns=[("total", "DOUBLE"), ("orders", "INTEGER")],
    )
    aggregate = TablestoreSparkSubmitOperator(
        task_id="aggregate",
        application=JOB,
        application_args=["--source-table", "{{ params.source_table }}",
                          "--result-table", "{{ params.result_table }}"],
        conf={"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file://{CONSUMER_LOG4J_CONFIG}"},
        tablestore_conn_id="tablestore_default",
        sink_tablestore_conn_id="tablestore_default",
    )
    chain(create_result_table, aggregate)
