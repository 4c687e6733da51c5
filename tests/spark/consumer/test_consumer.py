"""The spark-submit entry point: exit codes and messages for bad input, without starting Spark."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer import job as consumer

SECRET = "top-secret-access-key-value"


def _no_spark() -> None:
    raise AssertionError("Spark must not start")


def _env(monkeypatch: pytest.MonkeyPatch, endpoint: str, secret: str = SECRET) -> None:
    monkeypatch.setenv("TABLESTORE_ENDPOINT", endpoint)
    monkeypatch.setenv("TABLESTORE_INSTANCE", "emulator")
    monkeypatch.setenv("TABLESTORE_ACCESS_KEY_ID", "emulator-access-key-id")
    monkeypatch.setenv("TABLESTORE_ACCESS_KEY_SECRET", secret)
    for key in ("ENDPOINT", "INSTANCE", "ACCESS_KEY_ID", "ACCESS_KEY_SECRET"):
        monkeypatch.delenv("TABLESTORE_SINK_" + key, raising=False)


def test_bad_arguments_exit_2(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert consumer.run(["--table", "t", "--tunnel", "x", "--phase", "incremental", "--sink", "parquet",
                             "--sink-path", "p"], spark_factory=_no_spark) == 2
    assert "--cutoff" in caplog.text


def test_missing_credentials_exit_3(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    for key in ("ENDPOINT", "INSTANCE", "ACCESS_KEY_ID", "ACCESS_KEY_SECRET"):
        monkeypatch.delenv("TABLESTORE_" + key, raising=False)
    with caplog.at_level(logging.ERROR):
        assert consumer.run(["--table", "t", "--tunnel", "x", "--phase", "full", "--sink", "parquet",
                             "--sink-path", "p"], spark_factory=_no_spark) == consumer.EXIT_PERMANENT
    assert "TABLESTORE_" in caplog.text and "never as command-line arguments" in caplog.text


def test_missing_tunnel_exit_3_without_spark(tablestore_emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    _env(monkeypatch, tablestore_emulator.endpoint, tablestore_emulator.access_key_secret)
    with caplog.at_level(logging.INFO):
        code = consumer.run(["--table", "nope", "--tunnel", "nope", "--phase", "full", "--sink", "parquet",
                             "--sink-path", str(tmp_path)], spark_factory=_no_spark)
    assert code == consumer.EXIT_PERMANENT  # retrying cannot create the tunnel
    assert "does not exist" in caplog.text


def test_wrong_secret_is_reported_without_the_secret(tablestore_emulator: EmulatorProcess,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    _env(monkeypatch, tablestore_emulator.endpoint, SECRET)
    with caplog.at_level(logging.DEBUG):
        code = consumer.run(["--table", "t", "--tunnel", "x", "--phase", "full", "--sink", "parquet",
                             "--sink-path", str(tmp_path)], spark_factory=_no_spark)
    assert code == consumer.EXIT_PERMANENT  # a wrong secret stays wrong
    assert "OTSAuthFailed" in caplog.text
    assert SECRET not in caplog.text


def test_unreachable_endpoint_exit_1(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                     tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _env(monkeypatch, f"http://127.0.0.1:{port}")
    with caplog.at_level(logging.ERROR):
        code = consumer.run(["--table", "t", "--tunnel", "x", "--phase", "full", "--sink", "parquet",
                             "--sink-path", str(tmp_path), "--request-timeout", "2"], spark_factory=_no_spark)
    assert code == consumer.EXIT_RETRYABLE  # a network error is worth another try
    assert "127.0.0.1" in caplog.text or "Network" in caplog.text or "connect" in caplog.text.lower()


def test_runs_as_a_file_path() -> None:
    """spark-submit runs the file directly: it must import the installed package, not its siblings."""
    proc = subprocess.run([sys.executable, consumer.application_path(), "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--sink-conn-env-prefix" in proc.stdout and "--access-key" not in proc.stdout
