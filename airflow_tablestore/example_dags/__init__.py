"""Example DAGs you enable with one line in your dags folder: tunnel replication, PySpark and streaming jobs.

``from airflow_tablestore.example_dags.tablestore_replication import dag`` (or ``tablestore_spark_job``,
``tablestore_stream_job``) in a
file of your dags folder makes the DAG that file's; the repository's ``dags/`` holds exactly these lines.
"""
