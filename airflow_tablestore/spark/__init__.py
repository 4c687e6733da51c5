"""Everything that runs inside Spark (imports the client and PySpark, never Airflow).

:mod:`.consumer` is the tunnel consumer (a ``spark-submit`` application), :mod:`.datasource` the ``tablestore``
data source (``spark.read``/``df.write``), :mod:`.stream` its streaming source, :mod:`.sinks` where the consumer
writes; :mod:`.format` is the ``tablestore`` format's entry point over the data source and the streaming source;
:mod:`.arrow` holds what all of them share: Tablestore values and rows to Arrow, records to sink writes and
change-log rows. The subpackages import each
other one way only (``tests/test_layering.py``): consumer → sinks, stream → datasource.
"""
