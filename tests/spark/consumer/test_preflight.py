"""spark-submit preflight: a missing binary or Java is one actionable line, found before Spark starts."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from airflow_tablestore.spark.consumer.preflight import spark_submit_problem


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    _executable(tmp_path / "spark-submit")
    _executable(tmp_path / "java")
    assert spark_submit_problem(path=str(tmp_path)) is None


def test_missing_spark_submit(tmp_path: Path) -> None:
    problem = spark_submit_problem(path=str(tmp_path))
    assert problem is not None and "spark-submit is not on this worker's PATH" in problem and "\n" not in problem


def test_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    _executable(tmp_path / "spark-submit")
    problem = spark_submit_problem(path=str(tmp_path))
    assert problem is not None and problem.startswith("Java is not installed")


def test_java_home_without_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _executable(tmp_path / "bin" / "spark-submit")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    problem = spark_submit_problem(path=str(tmp_path / "bin"))
    assert problem is not None and "has no bin/java" in problem
    _executable(tmp_path / "jdk" / "bin" / "java")
    assert spark_submit_problem(path=str(tmp_path / "bin")) is None


def test_this_machine_can_submit() -> None:
    """The test venv's spark-submit (first on PATH in `make test`) and the machine's Java pass."""
    bin_dir = Path(sys.executable).parent
    assert spark_submit_problem(path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}") is None
