"""The sensor tests move the emulator's clock (retention expiry): they get an emulator of their own, so the
shared session emulator of the other Airflow-layer tests keeps real time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess() as emulator:
        yield emulator
