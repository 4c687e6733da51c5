"""Fixtures of the Spark consumer tests: a real emulator process and clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_helpers import unique  # noqa: F401 - shared fixture

from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.settings import TablestoreSettings


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "400", "--stream-partitions", "2",
                                     "--max-read-records", "150"]) as emu:
        yield emu


@pytest.fixture(scope="module")
def settings(tablestore_emulator: EmulatorProcess) -> TablestoreSettings:
    return TablestoreSettings(tablestore_emulator.endpoint, tablestore_emulator.instance, tablestore_emulator.access_key_id,
                              tablestore_emulator.access_key_secret)
