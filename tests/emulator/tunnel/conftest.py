"""Fixtures for the tunnel service tests: an in-process service over a real Store (fast state-machine tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.emulator_http import Http
from testing.emulator_tunnel import Env


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.store.close()


EMU_ARGS = ["--stream-partitions", "2", "--base-channel-rows", "10", "--max-read-records", "7"]


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorProcess]:
    """One emulator process per test module (small channel ranges and read batches to exercise paging)."""
    with EmulatorProcess(extra_args=EMU_ARGS) as proc:
        yield proc


@pytest.fixture
def http(emu: EmulatorProcess) -> Http:
    return Http(emu)


@pytest.fixture
def table(http: Http) -> str:
    """A fresh stream-enabled table ``pk INTEGER`` on the module's emulator."""
    return http.create_table(f"t{uuid.uuid4().hex[:10]}")
