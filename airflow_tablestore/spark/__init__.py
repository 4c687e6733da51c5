"""PySpark consumer of a Tablestore tunnel (never imports Airflow).

Run by ``spark-submit`` with :mod:`airflow_tablestore.spark.consumer` as the application file. The driver owns
the tunnel session (:mod:`.session`) and runs bounded rounds (:mod:`.driver`); Spark tasks read channels in
parallel (:mod:`.reader`) and write to a sink (:mod:`.sinks`) before the driver checkpoints.
"""
