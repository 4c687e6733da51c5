"""``python -m airflow_tablestore.spark.consumer ARGS``: the consumer without Spark's launcher."""

import sys
from typing import NoReturn

from airflow_tablestore.spark.consumer.job import main


def launch() -> NoReturn:
    """Run the consumer with this process's arguments and exit with its exit code."""
    sys.exit(main())


if __name__ == "__main__":
    launch()
