"""The streaming example DAG from the installed package: this line in your dags folder enables it (docs/spark.md)."""

from airflow_tablestore.example_dags.tablestore_stream_job import dag  # noqa: F401
