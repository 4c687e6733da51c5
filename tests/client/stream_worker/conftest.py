"""Fixtures of the stream-worker tests: one emulator per module with six stream shards."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

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


def wait_until(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll ``check`` until truthy; fail with ``what`` after ``timeout`` seconds (no timing assertions)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
