"""Launcher of the Spark consumer: ``spark-submit .../tablestore_consumer.py ARGS`` runs its ``main()``.

The consumer itself is :mod:`airflow_tablestore.spark.consumer`; this file only starts it (its path is
``airflow_tablestore.spark.consumer.job.application_path()``).
"""

import sys
from typing import NoReturn

from airflow_tablestore.spark.consumer.job import main


def launch() -> NoReturn:
    """Run the consumer with this process's arguments and exit with its exit code."""
    sys.exit(main())


if __name__ == "__main__":
    launch()
