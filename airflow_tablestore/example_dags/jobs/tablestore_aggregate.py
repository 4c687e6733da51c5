"""A user's PySpark job on Tablestore: read a table, aggregate it, write the result into another table.

Submitted by the ``tablestore_spark_job`` example DAG through ``TablestoreSparkSubmitOperator``, which adds
``--credentials-file`` (the Airflow connection, in a private file) and ``--summary-file`` (this job's result,
the task's XCom). Run it by hand the same way (``python -c "from airflow_tablestore.example_dags.jobs import
job_path; print(job_path('tablestore_aggregate'))"`` prints its path):
``spark-submit .../example_dags/jobs/tablestore_aggregate.py --source-table orders --result-table order_totals
--credentials-file creds.json``.
"""

from __future__ import annotations

import argparse
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-table", required=True)
    parser.add_argument("--result-table", required=True)
    parser.add_argument("--credentials-file", required=True)
    parser.add_argument("--summary-file")
    args = parser.parse_args(argv)

    spark = SparkSession.builder.appName(f"aggregate {args.source_table}").getOrCreate()
    orders = (spark.read.format("tablestore")
              .option("table", args.source_table)
              .option("credentials_file", args.credentials_file)
              .load())
    totals = orders.groupBy("shop").agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    (totals.write.format("tablestore")
     .option("table", args.result_table)
     .option("credentials_file", args.credentials_file)
     .mode("append")
     .save())

    summary = {"source_table": args.source_table, "result_table": args.result_table, "shops": totals.count()}
    print(f"JOB_SUMMARY {json.dumps(summary)}")
    if args.summary_file:
        with open(args.summary_file, "w", encoding="utf-8") as out:
            json.dump(summary, out)
    spark.stop()


if __name__ == "__main__":
    main()
