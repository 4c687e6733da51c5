"""The release the compatibility matrix and the documented journeys install: built once per session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .envs import build_dists


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(sdist, wheel)`` built by ``python -m build`` from a clean copy of the checkout."""
    started = time.monotonic()
    sdist, wheel = build_dists(tmp_path_factory.mktemp("release"))
    print(f"[compat] python -m build: {sdist.name}, {wheel.name} in {time.monotonic() - started:.0f}s", flush=True)
    return sdist, wheel
