"""PySpark jobs the example DAGs submit with ``spark-submit``: scripts that import pyspark, never airflow.

``spark-submit`` runs a job by its file path, :func:`job_path`; Python puts this directory first on the job's
``sys.path``, so it holds nothing but jobs.
"""

from __future__ import annotations

import os


def job_path(name: str) -> str:
    """Filesystem path of the job module ``name`` (``"tablestore_aggregate"``), the ``application`` of
    ``spark-submit``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
