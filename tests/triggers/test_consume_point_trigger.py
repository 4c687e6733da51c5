"""The deferrable trigger: serialization, success driven by a real TunnelWorker, own deadline, errors."""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow_helpers import collecting_worker, first_trigger_event, unique

from airflow_tablestore.client.epoch import parse_epoch_ns as to_epoch_ns
from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.triggers.tunnel import TablestoreTunnelConsumePointTrigger


def _trigger(table: str, tunnel: str, conn: str, cutoff_ns: int, **kwargs: Any) -> TablestoreTunnelConsumePointTrigger:
    hook_params = TablestoreTunnelHook(conn, read_timeout=15.0).hook_params
    return TablestoreTunnelConsumePointTrigger(table_name=table, tunnel_name=tunnel, cutoff_ns=cutoff_ns,
                                               hook_params=hook_params, **kwargs)


def test_serialize_round_trip_keeps_complete_configuration() -> None:
    hook_params = TablestoreTunnelHook("conn_x", region="cn-beijing", connect_timeout=2.0, read_timeout=9.0).hook_params
    trigger = TablestoreTunnelConsumePointTrigger(table_name="t", tunnel_name="tn", cutoff_ns=123,
                                                  hook_params=hook_params, poll_interval=5, max_wait_seconds=60)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    assert getattr(importlib.import_module(module), name) is TablestoreTunnelConsumePointTrigger
    kwargs = json.loads(json.dumps(kwargs))  # JSON-serialisable as the triggerer stores it
    rebuilt = TablestoreTunnelConsumePointTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.hook().hook_params == hook_params
    assert rebuilt.deadline == trigger.deadline  # absolute: a triggerer restart does not extend the wait


def test_success_once_a_real_consumer_passes_the_cutoff(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any
) -> None:
    # A change from before the tunnel existed: a Stream tunnel starts at "latest" and must not deliver it.
    tablestore_client.put_row(stream_table, (("id", "before"), ("seq", -1)), [("v", -1)])
    tunnel_id = tablestore_tunnel_client.create_tunnel(stream_table, "tr", TunnelType.STREAM)
    for i in range(20):
        tablestore_client.put_row(stream_table, (("id", f"k{i}"), ("seq", i)), [("v", i)])
    cutoff_ns = to_epoch_ns(datetime.now(UTC))
    hook = TablestoreTunnelHook(tablestore_airflow_conn)
    assert not hook.check_consume_point(stream_table, "tr", cutoff_ns).done  # nobody consumed yet

    with collecting_worker(tablestore_tunnel_client, tunnel_id) as seen:
        event = first_trigger_event(_trigger(stream_table, "tr", tablestore_airflow_conn, cutoff_ns,
                                             poll_interval=0.2, max_wait_seconds=120))
    assert event["status"] == "success", event
    assert event["consume_point_ns"] >= cutoff_ns
    assert event["tunnel_id"] == tunnel_id and event["cutoff_ns"] == cutoff_ns
    assert len(seen) == 20  # the consumer really read the changes


def test_base_data_tunnel_succeeds_once_every_channel_terminated(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any
) -> None:
    for i in range(30):
        tablestore_client.put_row(stream_table, (("id", f"b{i}"), ("seq", i)), [("v", i)])
    tunnel_id = tablestore_tunnel_client.create_tunnel(stream_table, "base", TunnelType.BASE_DATA)
    hook = TablestoreTunnelHook(tablestore_airflow_conn)
    assert not hook.check_consume_point(stream_table, "base", 0).done  # base data not read yet

    with collecting_worker(tablestore_tunnel_client, tunnel_id) as seen:
        # The cutoff is irrelevant for BaseData tunnels: far future still succeeds once all channels end.
        far = to_epoch_ns(datetime.now(UTC) + timedelta(days=365))
        event = first_trigger_event(_trigger(stream_table, "base", tablestore_airflow_conn, far, poll_interval=0.2,
                                             max_wait_seconds=120))
    assert event["status"] == "success", event
    assert event["tunnel_type"] == "BaseData" and "channels terminated" in event["message"]
    assert len({r.primary_key for r in seen}) == 30


def test_timeout_event_on_own_deadline(tablestore_airflow_conn: str, stream_table: str,
                                       tablestore_tunnel_client: Any) -> None:
    tablestore_tunnel_client.create_tunnel(stream_table, "idle", TunnelType.STREAM)
    far = to_epoch_ns(datetime.now(UTC) + timedelta(days=1))
    event = first_trigger_event(_trigger(stream_table, "idle", tablestore_airflow_conn, far, poll_interval=0.1,
                                  max_wait_seconds=0.3))
    assert event["status"] == "timeout"
    assert "max_wait_seconds=0.3" in event["message"]


def test_error_event_for_missing_tunnel(tablestore_airflow_conn: str, stream_table: str) -> None:
    event = first_trigger_event(_trigger(stream_table, unique("missing"), tablestore_airflow_conn, 1, poll_interval=0.1,
                                  max_wait_seconds=30))
    assert event["status"] == "error"
    assert "does not exist" in event["message"] and "TablestoreCreateTunnelOperator" in event["message"]
    assert event["code"]


def test_error_event_for_broken_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_TS_BROKEN", json.dumps({
        "conn_type": "tablestore", "host": "http://127.0.0.1:1", "login": "id", "password": "broken-secret-1234",
        "extra": {}}))
    trigger = TablestoreTunnelConsumePointTrigger(table_name="t", tunnel_name="tn", cutoff_ns=1,
                                                  hook_params={"tablestore_conn_id": "ts_broken"},
                                                  poll_interval=0.1, max_wait_seconds=5)
    event = first_trigger_event(trigger)
    assert event["status"] == "error" and "instance_name" in event["message"]
    assert "broken-secret-1234" not in json.dumps(event)


def test_error_event_for_unknown_connection_id() -> None:
    trigger = TablestoreTunnelConsumePointTrigger(table_name="t", tunnel_name="tn", cutoff_ns=1,
                                                  hook_params={"tablestore_conn_id": "no_such_conn_" + unique("c")},
                                                  poll_interval=0.1, max_wait_seconds=5)
    event = first_trigger_event(trigger)
    assert event["status"] == "error"
    assert "no_such_conn_" in event["message"]
