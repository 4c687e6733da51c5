"""The console links of the Tablestore tasks: addresses per endpoint form, and a real run that stores them."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow_helpers import run_user_pytest

from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.links.console import (
    TablestoreInstanceLink,
    TablestoreTableLink,
    instance_url,
    region_of,
    table_url,
)
from airflow_tablestore.operators.base import TablestoreBaseOperator
from airflow_tablestore.sensors.base import TablestoreBaseSensor


def _settings(endpoint: str, region: str | None = None) -> ConnectionSettings:
    return ConnectionSettings(endpoint=endpoint, access_key_id="AKID", access_key_secret="s3cr3t",
                              instance_name="myinst", region=region)


@pytest.mark.parametrize(("endpoint", "region", "expected"), [
    ("https://myinst.cn-hangzhou.ots.aliyuncs.com", None, "cn-hangzhou"),
    ("https://myinst.cn-hangzhou.tablestore.aliyuncs.com", None, "cn-hangzhou"),
    ("https://myinst.ap-southeast-1.vpc.tablestore.aliyuncs.com", None, "ap-southeast-1"),
    ("https://myinst.cn-shanghai.ots-internal.aliyuncs.com", None, "cn-shanghai"),
    ("https://myinst.cn-hangzhou.ots.aliyuncs.com", "cn-beijing", "cn-beijing"),  # the connection's region wins
    ("http://127.0.0.1:8800", "cn-hangzhou", "cn-hangzhou"),
    ("http://127.0.0.1:8800", None, None),  # the emulator: no console
    ("https://ots.example.com", None, None),
])
def test_region_from_the_connection_or_the_endpoint(endpoint: str, region: str | None,
                                                     expected: str | None) -> None:
    assert region_of(_settings(endpoint, region)) == expected


def test_console_addresses() -> None:
    cloud = _settings("https://myinst.cn-hangzhou.ots.aliyuncs.com")
    assert instance_url(cloud) == "https://otsnext.console.aliyun.com/cn-hangzhou/myinst/list"
    assert table_url(cloud, "orders") == "https://otsnext.console.aliyun.com/cn-hangzhou/myinst/orders/dataManage"
    emulator = _settings("http://127.0.0.1:8800")
    assert instance_url(emulator) == "" and table_url(emulator, "orders") == ""


def test_every_tablestore_task_has_both_links() -> None:
    from airflow.providers_manager import ProvidersManager

    for base in (TablestoreBaseOperator, TablestoreBaseSensor):
        assert {type(link) for link in base.operator_extra_links} == {TablestoreInstanceLink, TablestoreTableLink}
    registered = set(ProvidersManager().extra_links_class_names)
    assert {"airflow_tablestore.links.console.TablestoreInstanceLink",
            "airflow_tablestore.links.console.TablestoreTableLink"} <= registered


def test_a_missing_connection_gives_an_empty_link_not_a_second_error() -> None:
    from airflow_tablestore.operators.table import TablestoreDeleteTableOperator

    task = TablestoreDeleteTableOperator(task_id="drop", table_name="orders", tablestore_conn_id="no_such_conn")
    assert TablestoreTableLink().get_link(task, ti_key=None) == ""  # type: ignore[arg-type]


RUN_TEST = """
import json
from datetime import UTC, datetime

from airflow.models.xcom import XComModel
from airflow.sdk import DAG
from airflow.utils.session import create_session

from airflow_tablestore.operators.table import TablestoreCreateTableOperator


def test_links(tablestore_emulator, tablestore_airflow_db, monkeypatch):
    conn = json.loads(tablestore_emulator.airflow_connection_json())
    conn["extra"]["region"] = "cn-hangzhou"
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_LINKS", json.dumps(conn))
    with DAG("links_dag", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        TablestoreCreateTableOperator(task_id="create", table_name="linked", tablestore_conn_id="tablestore_links",
                                      primary_key=[("id", "STRING")])
    run = dag.test()
    assert run.state == "success"
    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == "links_dag", XComModel.task_id == "create")
        links = {x.key: XComModel.deserialize_value(x) for x in rows}
    instance = "https://otsnext.console.aliyun.com/cn-hangzhou/" + tablestore_emulator.instance
    assert links["_link_TablestoreInstanceLink"] == instance + "/list", links
    assert links["_link_TablestoreTableLink"] == instance + "/linked/dataManage", links
"""


@pytest.mark.slow
def test_a_run_stores_the_console_links(tmp_path: Path) -> None:
    """A task run the way Airflow runs it (dag.test, in a pytest session of its own with the plugin's isolated
    Airflow) leaves its links in XCom, where the UI reads them. The connection names a region (V4 signing, which
    the emulator verifies), so the links are the console's."""
    run_user_pytest(tmp_path, {"test_links.py": RUN_TEST}, passed=1)
