"""Fixtures of the Spark tests: a real emulator process, clients, and a local Spark session that can import
this package with the ``tablestore`` source registered (the no-registration path has its own test)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "400", "--stream-partitions", "2",
                                     "--max-read-records", "150"]) as emu:
        yield emu


@pytest.fixture(scope="module")
def settings(tablestore_emulator: EmulatorProcess) -> ConnectionSettings:
    return ConnectionSettings(tablestore_emulator.endpoint, tablestore_emulator.instance,
                              tablestore_emulator.access_key_id, tablestore_emulator.access_key_secret)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark's Python workers import the package (and find pyspark_tablestore) from the repository root.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from airflow_tablestore.spark.format import TablestoreDataSource

    session = (SparkSession.builder.master("local[2]").appName("test-tablestore-spark")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs at INFO from an atexit hook
    session.dataSource.register(TablestoreDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def client(settings: ConnectionSettings) -> Iterator[TableClient]:
    with settings.table_client() as table_client:
        yield table_client


@pytest.fixture(scope="module")
def connection(tablestore_emulator: EmulatorProcess) -> dict[str, str]:
    """The connection options of the emulator."""
    return {"endpoint": tablestore_emulator.endpoint, "instance": tablestore_emulator.instance,
            "access_key_id": tablestore_emulator.access_key_id,
            "access_key_secret": tablestore_emulator.access_key_secret}
