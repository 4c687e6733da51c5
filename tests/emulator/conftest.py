"""Fixtures of the emulator-core tests: one emulator process per module, a raw signed wire client, helpers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emu_wire import Wire, create_table, unique

from airflow_tablestore.emulator.testing import EmulatorProcess


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    """A fresh emulator process for the test module (small GetRange page budget to exercise paging)."""
    with EmulatorProcess(extra_args=["--range-page-rows", "50", "--stream-partitions", "2"]) as proc:
        yield proc


@pytest.fixture
def wire(emulator: EmulatorProcess) -> Iterator[Wire]:
    w = Wire(emulator.endpoint)
    yield w
    w.session.close()


@pytest.fixture
def table(wire: Wire) -> str:
    """A fresh table ``(pk INTEGER)``, max_versions 1, TTL forever."""
    return create_table(wire, unique("t"))
