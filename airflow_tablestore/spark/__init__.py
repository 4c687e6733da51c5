"""Everything that runs inside Spark (imports the client and PySpark, never Airflow).

:mod:`.consumer` is the tunnel consumer (a ``spark-submit`` application), :mod:`.datasource` the ``tablestore``
data source (``spark.read``/``df.write``), :mod:`.stream` its streaming source, :mod:`.sinks` where the consumer
writes; :mod:`.arrow` and :mod:`.changes` turn Tablestore answers into Arrow for all of them.
"""
