"""Example DAGs you enable with one line in your dags folder: the tunnel replication and a PySpark job.

``from airflow_tablestore.example_dags.tablestore_replication import dag`` (or ``tablestore_spark_job``) in a
file of your dags folder makes the DAG that file's; the repository's ``dags/`` holds exactly these lines.
"""
