"""The tunnel consumer: a ``spark-submit`` application that replicates a tunnel into a sink (docs/spark.md).

:mod:`.job` is the command line and exit codes, :mod:`.driver` runs the phases and rounds over the tunnel session
(:mod:`airflow_tablestore.client.tunnel.rounds`), :mod:`.reader` reads channels on executors, :mod:`.options`
parses the arguments.
"""

from airflow_tablestore.spark.consumer.job import application_path, main

__all__ = ["application_path", "main"]
