"""Fixtures of the tunnel-worker tests: one emulator per module with small channels and short reads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess

from .helpers import EMULATOR_ARGS

_names = itertools.count()


@pytest.fixture(scope="module")
def tablestore_emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorProcess]:
    """One emulator per test module; a module may set its own ``EMULATOR_ARGS``."""
    args = getattr(request.module, "EMULATOR_ARGS", EMULATOR_ARGS)
    with EmulatorProcess(extra_args=args) as emu:
        yield emu


@pytest.fixture()
def unique_table() -> str:
    """A fresh short table name per test."""
    return f"w{next(_names)}"
