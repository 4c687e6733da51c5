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
- ``tablestore_airflow_conn``: sets ``AIRFLOW_CONN_TABLESTORE_DEFAULT`` to the emulator for the test and returns
  the connection id, ``"tablestore_default"``; with it, ``dag.test()`` works (it asks for ``tablestore_airflow_db``).
- ``tablestore_airflow_db`` (session): the isolated Airflow metadata database, migrated once; ``dag.test()`` of a
  DAG defined in a test (or imported from your dags folder) then runs as it is.

**Isolated Airflow.** Unless ``AIRFLOW_HOME`` is set, the plugin points it at a temporary directory for the
session (removed at the end), with an empty dags folder and no example DAGs, before any test module imports
Airflow: tests never touch ``~/airflow``, and need no ``airflow db migrate`` and no environment variable. With
your own ``AIRFLOW_HOME`` the plugin leaves Airflow alone.

The plugin imports neither Airflow nor the client until a fixture is used, so it costs nothing elsewhere.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient
    from airflow_tablestore.emulator.testing import EmulatorProcess

AIRFLOW_CONN_ID = "tablestore_default"

_isolated_home: str | None = None
"""The temporary ``AIRFLOW_HOME`` this plugin made for the session (None: the user's own Airflow settings)."""


def pytest_configure(config: pytest.Config) -> None:
    """Give the session an Airflow home of its own unless the user set one (before tests import Airflow)."""
    global _isolated_home
    if "AIRFLOW_HOME" in os.environ or _isolated_home is not None:
        return
    _isolated_home = tempfile.mkdtemp(prefix="airflow-home-pytest-")
    dags = os.path.join(_isolated_home, "dags")
    os.makedirs(dags)
    os.environ["AIRFLOW_HOME"] = _isolated_home
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", dags)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _isolated_home
    if _isolated_home is not None:
        shutil.rmtree(_isolated_home, ignore_errors=True)
        _isolated_home = None


def _serializing_test(original: Any) -> Any:
    """``DAG.test`` that first writes the DAG into the metadata DB: Airflow's ``dag.test()`` only runs DAGs
    that its bundles' parsing stored, and a DAG defined in a test function is in no bundle."""

    def test(self: Any, *args: Any, **kwargs: Any) -> Any:
        from airflow.dag_processing.bundles.manager import DagBundlesManager
        from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

        DagBundlesManager().sync_bundles_to_db()
        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        bag.bag_dag(self)
        sync_bag_to_db(bag, "dags-folder", None)
        return original(self, *args, **kwargs)

    test.__wrapped__ = original  # type: ignore[attr-defined]
    return test


@pytest.fixture(scope="session")
def tablestore_airflow_db() -> Iterator[None]:
    """The session's isolated Airflow metadata DB, migrated once, with ``dag.test()`` able to run DAGs defined in
    tests (nothing happens with your own ``AIRFLOW_HOME``: its database is yours to prepare)."""
    if _isolated_home is None or os.environ.get("AIRFLOW_HOME") != _isolated_home:
        yield
        return
    from airflow.sdk import DAG
    from airflow.utils.db import initdb

    initdb()
    original = DAG.test
    DAG.test = _serializing_test(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        DAG.test = original  # type: ignore[method-assign]


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
def tablestore_airflow_conn(tablestore_emulator: EmulatorProcess, tablestore_airflow_db: None,
                            monkeypatch: pytest.MonkeyPatch) -> str:
    """The Airflow connection ``tablestore_default`` pointing at the emulator, for the duration of the test."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{AIRFLOW_CONN_ID.upper()}", tablestore_emulator.airflow_connection_json())
    return AIRFLOW_CONN_ID
