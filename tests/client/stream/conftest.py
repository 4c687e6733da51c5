"""Fixtures of the stream-worker tests: one emulator per module with six stream shards."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess

_names = itertools.count()


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--stream-partitions", "6", "--log-level", "WARNING"]) as emu:
        yield emu


@pytest.fixture()
def names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``names("src")`` → a fresh table name for this test."""
    n = next(_names)
    return lambda prefix: f"{prefix}_{n}"
