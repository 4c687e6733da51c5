"""Helpers of the Airflow-layer tests (hooks, operators, sensors, triggers, provider info).

The emulator, clients and the ``tablestore_default`` connection come from the package's pytest plugin
(``airflow_tablestore.pytest_plugin``); this module only names things uniquely and builds schemas.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
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
