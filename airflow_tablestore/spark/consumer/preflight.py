"""Before ``spark-submit`` runs: is there a ``spark-submit`` and a Java to run it? One actionable line if not.

Without these checks a missing binary surfaces as ``FileNotFoundError`` from deep inside the Spark provider's
hook, and a missing Java as a shell error in Spark's launcher output, after a retry delay or two.
"""

from __future__ import annotations

import os
import shutil


def spark_submit_problem(binary: str = "spark-submit", path: str | None = None) -> str | None:
    """``None`` when ``binary`` is on ``path`` (default ``$PATH``) and Java is found the way Spark's launcher
    looks for it (``$JAVA_HOME/bin/java``, else ``java`` on the path); otherwise what is missing and the fix."""
    search = path if path is not None else os.environ.get("PATH", "")
    if shutil.which(binary, path=search) is None:
        return (f"{binary} is not on this worker's PATH: install the spark extra "
                "(pip install 'airflow-provider-tablestore[spark]') and put its venv's bin/ first on PATH")
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        if not os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
            return f"JAVA_HOME={java_home} has no bin/java: point JAVA_HOME at a Java 17+ installation"
    elif shutil.which("java", path=search) is None:
        return "Java is not installed (Spark 4 needs Java 17+): install a JDK/JRE or set JAVA_HOME"
    return None
