"""One bounded pass over Tablestore connections against the emulator: what it lists, how many calls it makes,
and a failing or slow connection kept to its own row."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow_helpers import own_emulator, simple_schema

from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.ui.instances import Limits, collect

tablestore_emulator = own_emulator()  # faults injected here must not reach the session's other tests


@pytest.fixture
def instance(tablestore_emulator: EmulatorProcess, tablestore_airflow_conn: str) -> dict[str, Any]:
    kwargs = tablestore_emulator.client_kwargs
    with TableClient(**kwargs) as tables, TunnelClient(**kwargs) as tunnels:
        for name in ("t_a", "t_b", "t_plain"):
            if name not in tables.list_tables():
                tables.create_table(simple_schema(name, stream=name != "t_plain"))
        for table, tunnel in (("t_a", "one"), ("t_a", "two"), ("t_b", "three")):
            if tunnel not in {t.tunnel_name for t in tunnels.list_tunnels(table)}:
                tunnels.create_tunnel(table, tunnel)
    return {"conn_id": tablestore_airflow_conn}


def test_tables_tunnels_channels_and_the_calls_they_took(instance: dict[str, Any]) -> None:
    [view] = collect([instance["conn_id"]])
    assert view.error is None and view.instance_name and view.endpoint
    assert view.stream_tables == ["t_a", "t_b"]  # t_plain has no stream
    assert [(t.info.table_name, t.info.tunnel_name) for t in view.tunnels] == [("t_a", "one"), ("t_a", "two"),
                                                                              ("t_b", "three")]
    assert all(t.channels and t.error is None for t in view.tunnels)
    assert view.requests == 2 + 3 + 1  # ListTunnel, ListTable, 3 DescribeTunnel, DescribeTable of t_plain


def test_caps_cut_the_listing_short_and_say_so(instance: dict[str, Any]) -> None:
    [view] = collect([instance["conn_id"]], Limits(max_tunnels=2, max_tables=0))
    assert len(view.tunnels) == 2 and view.requests == 2 + 2
    assert "showing 2 of 3 tunnels" in view.notes
    assert any("stream checked on 0 of 1 tables" in n for n in view.notes)


def test_a_failing_connection_keeps_its_error_to_its_row(instance: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_NOPASSWORD", json.dumps({
        "conn_type": "tablestore", "host": "http://127.0.0.1:1", "login": "id", "extra": {"instance_name": "x"}}))
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_MALFORMED", "tablestore://id:s3cr3t-x@host:notaport/?instance_name=x")
    ids = [instance["conn_id"], "tablestore_nopassword", "tablestore_missing", "tablestore_malformed"]
    views = {v.conn_id: v for v in collect(ids)}
    assert views[instance["conn_id"]].error is None and views[instance["conn_id"]].tunnels
    missing = "missing Tablestore settings field 'password' (AccessKey Secret)"
    assert missing in (views["tablestore_nopassword"].error or "")
    assert "'tablestore_missing' is not defined" in (views["tablestore_missing"].error or "")
    malformed = views["tablestore_malformed"].error or ""
    assert "tablestore_malformed" in malformed and "s3cr3t-x" not in malformed


def test_a_slow_answer_is_cut_by_the_deadline(instance: dict[str, Any], tablestore_emulator: EmulatorProcess) -> None:
    tablestore_emulator.control.add_fault("/tunnel/describe", code=None, delay_s=4.0, count=3)
    [view] = collect([instance["conn_id"]], Limits(deadline_s=1.5, read_timeout_s=10, attempts=1))
    assert view.error is None  # the listing answered; only the descriptions were late
    assert view.tunnels and all(t.error == "no answer before the page's deadline" for t in view.tunnels)


def test_more_connections_than_a_view_shows(instance: dict[str, Any]) -> None:
    views = collect([instance["conn_id"], "a", "b"], Limits(max_connections=1))
    assert [v.conn_id for v in views] == [instance["conn_id"], "a, b"]
    assert views[1].error == "not shown: at most 1 connections per view"
