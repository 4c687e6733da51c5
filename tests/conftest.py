"""Root of the test suite.

The emulator, clients and Airflow connection fixtures come from the package's own pytest plugin
(``tablestore_emulator``, ``tablestore_client``, ``tablestore_tunnel_client``, ``tablestore_airflow_conn``); a
directory that needs other emulator flags overrides ``tablestore_emulator`` in its conftest. Shared helper
modules (``replication_helpers``, ``airflow_helpers``) are importable through ``pythonpath`` in pyproject.toml.

Airflow is isolated before any test imports it: a temporary ``AIRFLOW_HOME`` (unless one is set) and no example
DAGs; connections come from ``AIRFLOW_CONN_*`` variables, so no metadata DB is needed.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

import pytest

# pytest-xdist's workers inherit the controller's environment: each worker makes its own home, as the controller
# did, so that no two processes share one SQLite metadata database.
if "AIRFLOW_HOME" not in os.environ or os.environ.get("TABLESTORE_TESTS_OWN_HOME") == os.environ["AIRFLOW_HOME"]:
    _home = tempfile.mkdtemp(prefix="airflow-home-tablestore-tests-")
    os.environ["AIRFLOW_HOME"] = os.environ["TABLESTORE_TESTS_OWN_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


_fresh_names = itertools.count()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """A fresh name per call: ``unique("src")`` → ``src_<n>`` (unique across the whole session)."""
    return lambda prefix: f"{prefix}_{next(_fresh_names)}"


@pytest.fixture
def stream_table(tablestore_client: object) -> str:
    """A fresh table with the stream enabled (schema: :func:`airflow_helpers.simple_schema`)."""
    from airflow_helpers import simple_schema, unique

    name = unique("t")
    tablestore_client.create_table(simple_schema(name))  # type: ignore[attr-defined]
    return name


@pytest.fixture(scope="module")
def airflow_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests' own Airflow home migrated, and ``dag.test()`` able to run a DAG defined in a test (the
    package's plugin does this when it made the home; tests/conftest.py made this one)."""
    from airflow.sdk import DAG
    from airflow.utils.db import initdb

    from airflow_tablestore.pytest_plugin import _serializing_test

    if "airflow-home-tablestore-tests-" not in os.environ.get("AIRFLOW_HOME", ""):
        pytest.skip("dag.test() migrates a database: only in the tests' own AIRFLOW_HOME")
    patch = pytest.MonkeyPatch()
    patch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(tmp_path_factory.mktemp("dags")))
    initdb()
    patch.setattr(DAG, "test", _serializing_test(DAG.test))
    yield
    patch.undo()


# The compatibility matrix builds venvs of its own (minutes): only `make test-compat` runs it.
collect_ignore = [] if os.environ.get("TABLESTORE_COMPAT") else ["compat"]
