"""A user's PySpark streaming job: append a table's changes (through a tunnel) to Parquet files, incrementally.

Each run is one ``trigger(availableNow=True)`` query: it reads every change the tunnel has that the checkpoint
location has not seen yet (the table's base data first, then the stream), commits it in micro-batches and
stops. The next run, with the same ``--output`` and ``--checkpoint``, starts where this one ended, so every
change lands once. The rows have the change-log schema (channel, action, primary key, columns, sequence;
docs/spark.md).

Submitted by the ``tablestore_stream_job`` example DAG through ``TablestoreSparkSubmitOperator``, which adds
``--credentials-file`` (the Airflow connection, in a private file) and ``--summary-file`` (this job's result,
the task's XCom). Run it by hand the same way (``job_path('tablestore_stream_changes')`` of
``airflow_tablestore.example_dags.jobs`` prints its path): ``spark-submit .../tablestore_stream_changes.py
--table orders --tunnel orders_changes --output /data/orders/changes --checkpoint /data/orders/checkpoint
--credentials-file creds.json``.
"""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    parser.add_argument("--tunnel", required=True)
    parser.add_argument("--output", required=True, help="the Parquet directory the changes are appended to")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location (one per output)")
    parser.add_argument("--max-records-per-trigger", type=int, default=0,
                        help="at most this many changes per micro-batch (0, the default: no limit)")
    parser.add_argument("--credentials-file", required=True)
    parser.add_argument("--summary-file")
    args = parser.parse_args(argv)

    spark = SparkSession.builder.appName(f"stream changes of {args.table}").getOrCreate()
    # the summary counts the run's batches from query.recentProgress, which keeps the last 100 by default
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    reader = (spark.readStream.format("tablestore")
              .option("table", args.table)
              .option("tunnel", args.tunnel)
              .option("credentials_file", args.credentials_file)
              # a micro-batch's channels dealt to 4 read tasks per core of this application (as the consumer does)
              .option("max_tasks_per_batch", str(4 * spark.sparkContext.defaultParallelism)))
    if args.max_records_per_trigger:
        reader = reader.option("max_records_per_trigger", str(args.max_records_per_trigger))
    query = (reader.load().writeStream.format("parquet")
             .option("path", args.output)
             .option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True)
             .start())
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:  # the query failed: its batches so far stay committed
        print(f"JOB_FAILED the streaming query of {args.table!r} failed: {exc}", file=sys.stderr, flush=True)
        spark.stop()
        return 1

    progress = [p for p in query.recentProgress if p["numInputRows"]]  # batches that read something
    summary = {"table": args.table, "tunnel": args.tunnel, "output": args.output, "batches": len(progress),
               "rows": sum(p["numInputRows"] for p in progress)}
    print(f"JOB_SUMMARY {json.dumps(summary)}", flush=True)
    if args.summary_file:
        with open(args.summary_file, "w", encoding="utf-8") as out:
            json.dump(summary, out)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
