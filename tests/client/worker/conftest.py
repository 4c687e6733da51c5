"""Fixtures of the tunnel-worker tests: one emulator per module with small channels and short reads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.worker import TunnelWorkerConfig
from airflow_tablestore.emulator.testing import EmulatorProcess

EMULATOR_ARGS = ["--base-channel-rows", "40", "--max-read-records", "25", "--stream-partitions", "2",
                 "--log-level", "WARNING"]
_names = itertools.count()


@pytest.fixture(scope="module")
def tablestore_emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorProcess]:
    """One emulator per test module; a module may set its own ``EMULATOR_ARGS``."""
    args = getattr(request.module, "EMULATOR_ARGS", EMULATOR_ARGS)
    with EmulatorProcess(extra_args=args) as emu:
        yield emu


@pytest.fixture()
def unique() -> str:
    return f"w{next(_names)}"


def fast_config(**overrides: Any) -> TunnelWorkerConfig:
    """Short intervals so tests finish in seconds against the emulator."""
    settings: dict[str, Any] = {
        "heartbeat_interval_s": 0.3,
        "heartbeat_timeout_s": 3.0,
        "checkpoint_interval_s": 0.2,
        "reconnect_backoff_s": (0.05, 0.3),
        "allow_short_intervals": True,
        "client_tag": "test",
    }
    settings.update(overrides)
    return TunnelWorkerConfig(**settings)
