"""Shared fixtures of the Airflow-layer tests (hooks, operators, sensors, triggers, provider info).

Import it from a conftest (``from tablestore_airflow_testing import *``) after putting this directory on
``sys.path``. Importing it isolates Airflow: a temporary ``AIRFLOW_HOME`` (unless one is set), no example
DAGs. Connections come from ``AIRFLOW_CONN_*`` environment variables, so no metadata DB is needed.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

if "AIRFLOW_HOME" not in os.environ:
    _home = tempfile.mkdtemp(prefix="airflow-home-tablestore-tests-")
    os.environ["AIRFLOW_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

import pytest  # noqa: E402

from airflow_tablestore.client.model import (  # noqa: E402
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableSchema,
)

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


@pytest.fixture(scope="session")
def emulator() -> Iterator[Any]:
    """One emulator process per test directory (session scope within the conftest that imports this)."""
    from airflow_tablestore.emulator.testing import EmulatorProcess

    with EmulatorProcess() as emu:
        yield emu


@pytest.fixture
def tablestore_conn(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """``tablestore_default`` pointing at the emulator through ``AIRFLOW_CONN_TABLESTORE_DEFAULT``."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", emulator.airflow_connection_json())
    return CONN_ID


@pytest.fixture
def table_client(emulator: Any) -> Iterator[Any]:
    """A raw ``TableClient`` on the emulator, to arrange and check state independently of the hooks."""
    from airflow_tablestore.client.table import TableClient

    client = TableClient(**emulator.client_kwargs)
    yield client
    client.close()


@pytest.fixture
def tunnel_client(emulator: Any) -> Iterator[Any]:
    """A raw ``TunnelClient`` on the emulator."""
    from airflow_tablestore.client.tunnel import TunnelClient

    client = TunnelClient(**emulator.client_kwargs)
    yield client
    client.close()


@pytest.fixture
def stream_table(table_client: Any) -> str:
    """A fresh table with the stream enabled."""
    name = unique("t")
    table_client.create_table(simple_schema(name))
    return name


__all__ = [
    "CONN_ID",
    "emulator",
    "simple_schema",
    "stream_table",
    "table_client",
    "tablestore_conn",
    "tunnel_client",
    "unique",
]
