"""The replication DAG from the installed package: this line in your dags folder enables it (docs/airflow.md)."""

from airflow_tablestore.example_dags.tablestore_replication import dag  # noqa: F401
