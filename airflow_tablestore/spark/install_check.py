"""Refuse a mixed PySpark install: one PySpark version for the Python files, the distributions and the jars.

``apache-airflow-providers-apache-spark`` depends on ``pyspark-client``, which ships a copy of PySpark's Python
files: with a differently-versioned ``pyspark`` in the same environment, whichever was installed last wins and
the Python side no longer matches the jars. The package's extras pin both to one release; these checks catch an
environment assembled by hand and name the command that repairs it.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def python_side_problem() -> str | None:
    """A one-line description of an inconsistent PySpark install (Python side), or ``None`` if consistent."""
    import pyspark

    files = getattr(pyspark, "__version__", None)
    full = _installed("pyspark")
    client = _installed("pyspark-client")
    if full is None and client is None:  # a Spark distribution's python/ (SPARK_HOME), not pip: see the JVM check
        return None
    if full is None:
        return (f"only pyspark-client {client} is installed (Spark Connect only, no spark-submit or jars): "
                "pip install 'airflow-provider-tablestore[spark]'")
    if client is not None and client != full:
        return (f"pyspark {full} and pyspark-client {client} are both installed and overwrite each other's files "
                f"(the Python files now say {files}): install one version of both, e.g. "
                f"pip install 'pyspark=={client}' 'pyspark-client=={client}'")
    if files != full:
        return (f"the pyspark package files say {files} but pyspark {full} is installed: "
                f"pip install --force-reinstall --no-deps 'pyspark=={full}'")
    return None


def jvm_side_problem(spark: Any) -> str | None:
    """``None`` when the JVM runs the Spark version of the Python files; else a one-line description."""
    import pyspark

    if spark.version != pyspark.__version__:
        return (f"Spark {spark.version} runs the job but the Python files are PySpark {pyspark.__version__}: "
                "use the spark-submit of the same environment (its bin/ first on PATH) or install matching versions")
    return None
