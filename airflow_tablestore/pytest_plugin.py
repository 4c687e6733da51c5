"""pytest fixtures that run the local Tablestore emulator for your tests (registered as the ``tablestore`` plugin).

Installed with the package (``pytest11`` entry point), so any test can ask for them::

    def test_my_dag_task(tablestore_airflow_conn, tablestore_client):
        tablestore_client.create_table(...)          # arrange on the emulator
        ...                                          # run code that uses the 'tablestore_default' connection

Fixtures:

- ``tablestore_emulator`` (session): a running :class:`~airflow_tablestore.emulator.testing.EmulatorProcess` on a
  free 127.0.0.1 port with a temporary data directory. Its flags come from ``tablestore_emulator_args``
  (session-scoped: override it once, in the root conftest, e.g. ``["--stream-partitions", "2"]``). A directory or
  module that needs other flags or its own clock overrides ``tablestore_emulator`` itself in its conftest (any
  scope, e.g. ``scope="module"``); the other fixtures follow the override. (Overriding only the args in a
  subdirectory would not start a second session emulator: pytest keeps one value per session fixture.)
- ``tablestore_client`` / ``tablestore_tunnel_client``: a ``TableClient`` / ``TunnelClient`` on it, closed after
  the test.
- ``tablestore_airflow_conn``: sets ``AIRFLOW_CONN_TABLESTORE_DEFAULT`` to the emulator for the test (no Airflow
  metadata database needed) and returns the connection id, ``"tablestore_default"``.

The plugin imports neither Airflow nor the client until a fixture is used, so it costs nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient
    from airflow_tablestore.emulator.testing import EmulatorProcess

AIRFLOW_CONN_ID = "tablestore_default"


@pytest.fixture(scope="session")
def tablestore_emulator_args() -> list[str]:
    """Extra ``tablestore-emulator`` flags of the session emulator (override once, session-scoped, in the root
    conftest; per-directory flags need a ``tablestore_emulator`` override instead)."""
    return []


@pytest.fixture(scope="session")
def tablestore_emulator(tablestore_emulator_args: list[str]) -> Iterator[EmulatorProcess]:
    """One emulator process for the test session (stopped and its data removed at the end)."""
    from airflow_tablestore.emulator.testing import EmulatorProcess

    with EmulatorProcess(extra_args=tablestore_emulator_args) as emulator:
        yield emulator


@pytest.fixture
def tablestore_client(tablestore_emulator: EmulatorProcess) -> Iterator[TableClient]:
    """A ``TableClient`` on the emulator."""
    from airflow_tablestore.client.table.client import TableClient

    with TableClient(**tablestore_emulator.client_kwargs) as client:
        yield client


@pytest.fixture
def tablestore_tunnel_client(tablestore_emulator: EmulatorProcess) -> Iterator[TunnelClient]:
    """A ``TunnelClient`` on the emulator."""
    from airflow_tablestore.client.tunnel.client import TunnelClient

    with TunnelClient(**tablestore_emulator.client_kwargs) as client:
        yield client


@pytest.fixture
def tablestore_airflow_conn(tablestore_emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Airflow connection ``tablestore_default`` pointing at the emulator, for the duration of the test."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{AIRFLOW_CONN_ID.upper()}", tablestore_emulator.airflow_connection_json())
    return AIRFLOW_CONN_ID
