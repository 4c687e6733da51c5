"""Helpers of the Airflow-layer tests (hooks, operators, sensors, triggers, provider info).

The emulator, clients and the ``tablestore_default`` connection come from the package's pytest plugin
(``airflow_tablestore.pytest_plugin``); this module names things uniquely, builds schemas, runs a consuming
worker and a user's own pytest session.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableSchema,
)
from airflow_tablestore.emulator.testing import EmulatorProcess

CONN_ID = "tablestore_default"
_counter = itertools.count()


def unique(prefix: str) -> str:
    """A name unique within the session (tables/tunnels share one emulator)."""
    return f"{prefix}_{os.getpid()}_{next(_counter)}"


def simple_schema(name: str, *, stream: bool = True) -> TableSchema:
    """Two-column primary key (``id`` STRING, ``seq`` INTEGER), stream optionally enabled."""
    return TableSchema(
        name=name,
        primary_key=(PrimaryKeyColumn("id", PrimaryKeyType.STRING), PrimaryKeyColumn("seq", PrimaryKeyType.INTEGER)),
        stream=StreamSpec(enabled=True, expiration_hours=24) if stream else None,
    )


def own_emulator(extra_args: list[str] | None = None) -> Any:
    """A module-scoped ``tablestore_emulator`` override, for test modules that move the emulator's clock or need
    other flags (the shared session emulator of the other Airflow-layer tests keeps real time):
    ``tablestore_emulator = own_emulator()`` at module level."""

    @pytest.fixture(scope="module")
    def tablestore_emulator() -> Iterator[EmulatorProcess]:
        with EmulatorProcess(extra_args=extra_args) as emulator:
            yield emulator

    return tablestore_emulator


def first_trigger_event(trigger: Any) -> dict[str, Any]:
    """The payload of the first event a trigger yields (run on its own event loop, as the triggerer would)."""
    import asyncio

    async def first() -> Any:
        agen = trigger.run()
        try:
            return await anext(agen)
        finally:
            await agen.aclose()

    return dict(asyncio.run(first()).payload)


@contextlib.contextmanager
def collecting_worker(tunnel_client: Any, tunnel_id: str) -> Iterator[list[Any]]:
    """A real ``TunnelWorker`` consuming ``tunnel_id`` (fast heartbeats and checkpoints) for the block; yields the
    list its records are appended to, and shuts the worker down when the block ends."""
    from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
    from airflow_tablestore.client.tunnel.processor import CallbackProcessor
    from airflow_tablestore.client.tunnel.worker import TunnelWorker

    seen: list[Any] = []
    config = TunnelWorkerConfig(heartbeat_interval_s=0.2, heartbeat_timeout_s=10.0, checkpoint_interval_s=0.1,
                                allow_short_intervals=True, progress_log_interval_s=5.0)
    worker = TunnelWorker(tunnel_client, tunnel_id, CallbackProcessor(lambda records, ctx: seen.extend(records)),
                          config).start()
    try:
        yield seen
    finally:
        worker.shutdown(timeout=30)


def run_user_pytest(directory: Path, files: dict[str, str], passed: int) -> None:
    """Write ``files`` into ``directory`` and run pytest there the way a user would: no conftest of ours, no
    AIRFLOW_* or PYTEST_* variables, only the installed plugin; asserts that exactly ``passed`` tests passed."""
    for name, text in files.items():
        (directory / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTEST_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                             str(directory), str(directory)], capture_output=True, text=True, env=env,
                            cwd=directory, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(rf"\b{passed} passed\b", result.stdout), result.stdout[-2000:]
