"""``python -m airflow_tablestore.spark.consumer ARGS``: the consumer without Spark's launcher."""

import sys

from airflow_tablestore.spark.consumer.job import main

if __name__ == "__main__":
    sys.exit(main())
