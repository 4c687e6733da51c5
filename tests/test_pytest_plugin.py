"""The ``tablestore`` pytest plugin as a user meets it: a test file outside this repository, no conftest, the
fixtures found through the installed ``pytest11`` entry point."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

USER_TESTS = '''
import json
import os

from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, TableSchema


def test_table_round_trip(tablestore_client):
    tablestore_client.create_table(TableSchema("orders", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    tablestore_client.put_row("orders", [("id", 1)], {"status": "new"})
    assert "orders" in tablestore_client.list_tables()


def test_airflow_connection_points_at_the_emulator(tablestore_airflow_conn, tablestore_emulator):
    conn = json.loads(os.environ["AIRFLOW_CONN_TABLESTORE_DEFAULT"])
    assert tablestore_airflow_conn == "tablestore_default"
    assert conn["host"] == tablestore_emulator.endpoint and conn["extra"]["instance_name"] == "emulator"


def test_tunnel_client_on_the_same_emulator(tablestore_tunnel_client, tablestore_emulator):
    assert tablestore_tunnel_client.transport.endpoint == tablestore_emulator.endpoint
'''

OVERRIDE_CONFTEST = '''
import pytest

@pytest.fixture(scope="session")
def tablestore_emulator_args():
    return ["--stream-partitions", "2"]
'''

OVERRIDE_TEST = '''
def test_flags_reach_the_emulator(tablestore_emulator, tablestore_client):
    assert tablestore_emulator.extra_args == ["--stream-partitions", "2"]
    assert tablestore_client.list_tables() == []
'''


def test_entry_point_is_registered() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "tablestore"]
    assert entry.value == "airflow_tablestore.pytest_plugin"


def _pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(directory), str(directory)],
        cwd=directory, capture_output=True, text=True, timeout=300,
    )


def test_user_tests_get_the_fixtures_without_any_setup(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    result = _pytest(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 passed" in result.stdout


def test_emulator_flags_can_be_overridden(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(OVERRIDE_CONFTEST))
    (tmp_path / "test_override.py").write_text(textwrap.dedent(OVERRIDE_TEST))
    result = _pytest(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
