"""The PySpark install check: a consistent environment passes; each kind of mix gives one actionable line."""

from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace

import pyspark
import pytest

from airflow_tablestore.spark import install_check


def _versions(monkeypatch: pytest.MonkeyPatch, *, files: str, full: str | None, client: str | None) -> None:
    installed = {"pyspark": full, "pyspark-client": client}

    def version(name: str) -> str:
        if installed.get(name) is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]  # type: ignore[return-value]

    monkeypatch.setattr(install_check.importlib.metadata, "version", version)
    monkeypatch.setattr(pyspark, "__version__", files)


def test_this_environment_is_consistent() -> None:
    """The test venv is installed from the extras: its PySpark must pass the check."""
    assert install_check.python_side_problem() is None


def test_matching_client_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    _versions(monkeypatch, files="4.2.0", full="4.2.0", client="4.2.0")
    assert install_check.python_side_problem() is None


def test_client_of_another_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _versions(monkeypatch, files="4.2.0", full="4.3.0", client="4.2.0")
    problem = install_check.python_side_problem()
    assert problem is not None and "\n" not in problem
    assert "pyspark 4.3.0 and pyspark-client 4.2.0" in problem and "pip install 'pyspark==4.2.0'" in problem


def test_only_the_client_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _versions(monkeypatch, files="4.2.0", full=None, client="4.2.0")
    problem = install_check.python_side_problem()
    assert problem is not None and "[spark]" in problem


def test_spark_distribution_without_pip_metadata_is_left_to_the_jvm_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark from $SPARK_HOME/python (a cluster's Spark, not pip) has no distribution metadata at all."""
    _versions(monkeypatch, files="4.2.0", full=None, client=None)
    assert install_check.python_side_problem() is None


def test_files_of_another_version_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _versions(monkeypatch, files="4.1.0", full="4.2.0", client=None)
    problem = install_check.python_side_problem()
    assert problem is not None and "--force-reinstall" in problem


def test_jvm_of_another_version_is_refused() -> None:
    assert install_check.jvm_side_problem(SimpleNamespace(version=pyspark.__version__)) is None
    problem = install_check.jvm_side_problem(SimpleNamespace(version="3.5.1"))
    assert problem is not None and "Spark 3.5.1" in problem and pyspark.__version__ in problem
