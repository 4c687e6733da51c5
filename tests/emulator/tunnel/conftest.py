"""Fixtures for the tunnel service tests: an in-process service over a real Store (fast state-machine tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tunnel_emu_helpers import Env


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.store.close()
