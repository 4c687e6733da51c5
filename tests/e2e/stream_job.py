"""A user's streaming job for the streaming-source crash test (``spark-submit`` application, not a test module).

``stream_job.py SINK TABLE TUNNEL OUTPUT CHECKPOINT [KEY=VALUE ...]`` drains the tunnel with
``trigger(availableNow=True)`` into Spark's Parquet file sink (``SINK=files``) or a ``foreachBatch`` sink that
writes each batch to ``OUTPUT/batch_id=N`` with overwrite (``SINK=foreach``: a replayed batch replaces its own
output). Extra ``KEY=VALUE`` arguments are source options. The connection comes from ``TABLESTORE_*``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

from airflow_tablestore.spark.datasource.source import TablestoreDataSource


def main(argv: list[str]) -> int:
    sink, table, tunnel, output, checkpoint, *extra = argv
    spark = SparkSession.builder.appName(f"stream-{sink}").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TablestoreDataSource)
    reader = spark.readStream.format("tablestore").option("table", table).option("tunnel", tunnel)
    for item in extra:
        key, _, value = item.partition("=")
        reader = reader.option(key, value)
    frame = reader.load()
    if sink == "files":
        writer = frame.writeStream.format("parquet").option("path", output)
    else:
        def write_batch(batch: Any, batch_id: int) -> None:
            batch.write.mode("overwrite").parquet(f"{output}/batch_id={batch_id}")

        writer = frame.writeStream.foreachBatch(write_batch)
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print("STREAM_SUMMARY " + json.dumps({"batches": len(query.recentProgress), "rows": rows}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
