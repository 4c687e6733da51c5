"""Spark's discovery hook for the ``tablestore`` format: PySpark registers the ``DefaultSource`` of every
importable ``pyspark_*`` module, so ``spark.read.format("tablestore")`` works with no registration line."""

from airflow_tablestore.spark.format import TablestoreDataSource

DefaultSource = TablestoreDataSource
