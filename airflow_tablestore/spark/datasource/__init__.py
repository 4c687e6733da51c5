"""Tablestore as a PySpark data source, format ``tablestore``: ``spark.read`` and ``df.write`` of a table."""
