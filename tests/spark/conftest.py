"""Fixtures of the Spark consumer tests: a real emulator process and clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.emulator.testing import EmulatorProcess


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "400", "--stream-partitions", "2",
                                     "--max-read-records", "150"]) as emu:
        yield emu


@pytest.fixture(scope="module")
def settings(tablestore_emulator: EmulatorProcess) -> ConnectionSettings:
    return ConnectionSettings(tablestore_emulator.endpoint, tablestore_emulator.instance,
                              tablestore_emulator.access_key_id, tablestore_emulator.access_key_secret)
