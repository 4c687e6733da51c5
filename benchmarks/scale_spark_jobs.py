"""The two data-source jobs ``bench_scale_spark`` submits beside the consumer, each into Spark's ``noop`` sink:

* ``--job read``: ``spark.read`` of the whole table (every row, the primary key and the defined columns);
* ``--job stream``: ``spark.readStream`` of a tunnel with ``trigger(availableNow=True)``: its base data, then every
  change committed before the query started.

Credentials come from the ``TABLESTORE_*`` environment (never the command line). Writes ``{"records": n,
"batches": m}`` to ``--summary-file``: the rows Spark wrote to the sink (for the stream, the sum of its
micro-batches' input rows).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyspark.sql import SparkSession

from airflow_tablestore.spark.format import TablestoreDataSource


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job", choices=("read", "stream"), required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--tunnel", help="the tunnel --job stream reads")
    ap.add_argument("--checkpoint", type=Path, help="the streaming query's checkpoint directory")
    ap.add_argument("--summary-file", type=Path, required=True)
    args = ap.parse_args()
    spark = SparkSession.builder.appName(f"bench-scale-{args.job}").getOrCreate()
    spark.dataSource.register(TablestoreDataSource)  # an editable install is not found by Spark's lookup
    if args.job == "read":
        records = spark.read.format("tablestore").option("table", args.table).load().count()
        batches = 1
    else:
        query = (spark.readStream.format("tablestore").option("table", args.table).option("tunnel", args.tunnel)
                 .load().writeStream.format("noop").option("checkpointLocation", str(args.checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        records, batches = sum(p["numInputRows"] for p in progress), len(progress)
    args.summary_file.write_text(json.dumps({"records": records, "batches": batches}))
    spark.stop()


if __name__ == "__main__":
    main()
