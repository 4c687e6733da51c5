"""PySpark consumer of a Tablestore tunnel (never imports Airflow).

Run by ``spark-submit`` with the launcher ``application/tablestore_consumer.py`` as the application file
(:func:`.consumer.application_path`), which runs :func:`airflow_tablestore.spark.consumer.main`. The driver owns
the tunnel session (:mod:`.session`) and runs bounded rounds (:mod:`.driver`); Spark tasks read channels in
parallel (:mod:`.reader`) and write to a sink (:mod:`.sinks`) before the driver checkpoints.
"""
