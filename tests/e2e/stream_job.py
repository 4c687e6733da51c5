"""A user's streaming job for the streaming-source crash test (``spark-submit`` application, not a test module).

``stream_job.py SINKS TABLE OUTPUT CHECKPOINT [KEY=VALUE ...]`` drains, for each sink named in the comma-separated
``SINKS``, the tunnel ``feed_<sink>`` of ``TABLE`` with ``trigger(availableNow=True)``: ``files`` into Spark's
Parquet file sink at ``OUTPUT/files``; ``foreach`` through a ``foreachBatch`` sink that writes each batch to
``OUTPUT/foreach/batch_id=N`` with overwrite (a replayed batch replaces its own output). The queries run one
after the other in one Spark application, each with its checkpoint under ``CHECKPOINT/<sink>``. Extra ``KEY=VALUE``
arguments are source options. The connection comes from ``TABLESTORE_*``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

from airflow_tablestore.spark.format import TablestoreDataSource


def start(spark: Any, sink: str, table: str, output: str, checkpoint: str, extra: list[str]) -> Any:
    reader = spark.readStream.format("tablestore").option("table", table).option("tunnel", f"feed_{sink}")
    for item in extra:
        key, _, value = item.partition("=")
        reader = reader.option(key, value)
    frame = reader.load()
    if sink == "files":
        writer = frame.writeStream.format("parquet").option("path", f"{output}/files")
    else:
        def write_batch(batch: Any, batch_id: int) -> None:
            batch.write.mode("overwrite").parquet(f"{output}/foreach/batch_id={batch_id}")

        writer = frame.writeStream.foreachBatch(write_batch)
    return writer.option("checkpointLocation", f"{checkpoint}/{sink}").trigger(availableNow=True).start()


def main(argv: list[str]) -> int:
    sinks, table, output, checkpoint, *extra = argv
    spark = SparkSession.builder.appName("stream-crash-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TablestoreDataSource)
    summary = {}
    for sink in sinks.split(","):  # one after the other: two Python streaming sources at once in one
        query = start(spark, sink, table, output, checkpoint, extra)  # application fail task deserialization
        query.awaitTermination()
        summary[sink] = {"batches": len(query.recentProgress),
                         "rows": sum(p["numInputRows"] for p in query.recentProgress)}
    print("STREAM_SUMMARY " + json.dumps(summary), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
