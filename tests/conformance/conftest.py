"""Fixtures of the conformance tests: the official SDK's oracle venv and an emulator it talks to."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess

# `testing` is a top-level package of the repository (on sys.path through pythonpath in pyproject.toml)
from testing.oracle import OracleUnavailable, ensure_oracle_venv

# pip output meaning "no index to install from", as opposed to a broken environment (which must fail).
_UNREACHABLE = re.compile(
    r"No matching distribution|Could not find a version|NewConnectionError|Max retries exceeded|"
    r"Temporary failure in name resolution|Network is unreachable|Connection refused|ConnectTimeout|ReadTimeout",
)


@pytest.fixture(scope="session")
def oracle_python() -> Path:
    """The oracle venv's interpreter (created on first use; skips only when PyPI cannot be reached)."""
    try:
        return ensure_oracle_venv()
    except OracleUnavailable as exc:
        if _UNREACHABLE.search(str(exc)):
            pytest.skip(f"the official SDK cannot be installed, PyPI is unreachable: {str(exc)[-300:]}")
        raise


@pytest.fixture(scope="module")
def sdk_emulator() -> Iterator[EmulatorProcess]:
    """An emulator with a small GetRange page so that server-side pagination shows with a few rows."""
    with EmulatorProcess(extra_args=["--range-page-rows", "10"]) as emulator:
        yield emulator
