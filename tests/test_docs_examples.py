"""docs/airflow.md's examples of the operators, sensors and triggers a DAG author writes, run as written: each
snippet is placed in a DAG and run with ``dag.test()`` against the emulator, in a pytest session of its own that
uses only the installed plugin (no conftest, no AIRFLOW_HOME), as a user's test would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from airflow_helpers import run_user_pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "airflow.md"

pytestmark = pytest.mark.slow


def doc_snippet(first_line: str) -> str:
    """The one Python block of docs/airflow.md that starts with ``first_line``."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/airflow.md must hold one Python block starting with {first_line!r}"
    return blocks[0]


SNIPPETS = {
    "consume": doc_snippet("from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator"),
    "row": doc_snippet("from airflow_tablestore.sensors.row import TablestoreRowSensor"),
    "verify": doc_snippet("from airflow_tablestore.operators.verify import TablestoreVerifyReplicaOperator"),
}

SESSION = '''
import json
from datetime import UTC, datetime, timedelta

from airflow.models.xcom import XComModel
from airflow.sdk import DAG
from airflow.utils.session import create_session

from airflow_tablestore.client.model import Column, PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema

SNIPPETS = json.loads(%r)
START = datetime(2026, 1, 1, tzinfo=UTC)


def run_snippet(name, logical_date):
    """The doc's snippet inside a DAG, run by dag.test(); returns the run and its tasks' XCom results."""
    with DAG(f"doc_{name}", schedule=None, start_date=START) as dag:
        exec(SNIPPETS[name], {})
    run = dag.test(logical_date=logical_date)
    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == dag.dag_id, XComModel.key == "return_value")
        results = {x.task_id: XComModel.deserialize_value(x) for x in rows}
    return run, results


def table(client, name, keys, stream=False):
    client.create_table(TableSchema(name=name, primary_key=tuple(PrimaryKeyColumn(k, t) for k, t in keys),
                                    stream=StreamSpec(enabled=True, expiration_hours=24) if stream else None))


def test_consume_operator_example(tablestore_airflow_conn, tablestore_client, tablestore_tunnel_client):
    table(tablestore_client, "orders", [("id", PrimaryKeyType.INTEGER)], stream=True)
    for i in range(50):
        tablestore_client.put_row("orders", [("id", i)], [("amount", float(i))])
    tablestore_tunnel_client.create_tunnel("orders", "orders_changes")
    for i in range(20):
        tablestore_client.update_row("orders", [("id", i)], [("amount", -1.0)])
    run, results = run_snippet("consume", datetime.now(UTC) + timedelta(seconds=1))
    assert run.state == "success", results
    consumed = results["consume_orders"]
    assert consumed["stopped"] == "cutoff" and consumed["records"] == 70, consumed


def test_row_sensor_example(tablestore_airflow_conn, tablestore_client):
    table(tablestore_client, "jobs", [("job", PrimaryKeyType.STRING), ("day", PrimaryKeyType.STRING)])
    tablestore_client.put_row("jobs", [("job", "export"), ("day", "2026-11-20")], [("status", "skipped")])
    run, results = run_snippet("row", datetime(2026, 11, 20, 6, tzinfo=UTC))
    assert run.state == "success", results


def test_verify_operator_example(tablestore_airflow_conn, tablestore_client):
    if "orders" in tablestore_client.list_tables():  # the consume example's
        tablestore_client.delete_table("orders")
    version = int(datetime.now(UTC).timestamp() * 1000)  # the replica keeps the source's cell versions
    for name in ("orders", "orders_replica"):
        table(tablestore_client, name, [("id", PrimaryKeyType.INTEGER)])
        for i in range(30):
            tablestore_client.put_row(name, [("id", i)], [Column("amount", float(i), version)])
    tablestore_client.put_row("orders_replica", [("id", 99)], [("_tunnel_seq", "00000001-deleted")])  # tombstone
    run, results = run_snippet("verify", datetime.now(UTC))
    assert run.state == "success", results
    verified = results["verify_replica"]
    assert (verified["ok"], verified["equal"], verified["tombstones"]) == (True, 30, 1), verified
'''


def test_the_documented_examples_run_against_the_emulator(tmp_path: Path) -> None:
    run_user_pytest(tmp_path, {"test_doc_examples.py": SESSION % json.dumps(SNIPPETS)}, passed=len(SNIPPETS))
