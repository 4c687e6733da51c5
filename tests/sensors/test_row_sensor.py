"""The row sensor and its trigger against a real emulator: existence, a column's value, deferral, the trigger's
events (success when a writer arrives, timeout, errors), and arguments that fail at once."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, TaskDeferred
from airflow_helpers import first_trigger_event, unique

from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.sensors.row import TablestoreRowSensor
from airflow_tablestore.triggers.row import TablestoreRowTrigger
from airflow_tablestore.triggers.row_check import RowCheck

NO_CONTEXT: Any = {}


def _sensor(table: str, conn: str = "tablestore_default", **kwargs: Any) -> TablestoreRowSensor:
    kwargs.setdefault("primary_key", {"id": "a", "seq": 1})
    return TablestoreRowSensor(task_id=unique("wait_row"), table_name=table, tablestore_conn_id=conn, **kwargs)


def test_poke_waits_for_the_row_then_for_the_value(tablestore_airflow_conn: str, stream_table: str,
                                                    tablestore_client: Any) -> None:
    exists = _sensor(stream_table, tablestore_airflow_conn)
    status = _sensor(stream_table, tablestore_airflow_conn, column="status", expected=["done", "skipped"])
    assert exists.poke(NO_CONTEXT).is_done is False
    tablestore_client.put_row(stream_table, [("id", "a"), ("seq", 1)], [("status", "running")])
    assert exists.poke(NO_CONTEXT).is_done is True
    waiting = status.poke(NO_CONTEXT)
    assert waiting.is_done is False
    tablestore_client.put_row(stream_table, [("id", "a"), ("seq", 1)], [("status", "done")])
    done = status.poke(NO_CONTEXT)
    assert done.is_done is True and "'done'" in done.xcom_value["message"]


def test_deferrable_sensor_defers_and_its_trigger_fires_when_the_value_arrives(
        tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any) -> None:
    sensor = _sensor(stream_table, tablestore_airflow_conn, primary_key=[("id", "b"), ("seq", 2)],
                     column="status", expected="done", deferrable=True, poke_interval=0.2)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(NO_CONTEXT)
    trigger = deferred.value.trigger
    assert isinstance(trigger, TablestoreRowTrigger)
    path, kwargs = trigger.serialize()  # what the triggerer stores and rebuilds
    module, name = path.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    writer = threading.Timer(1.0, lambda: tablestore_client.put_row(stream_table, [("id", "b"), ("seq", 2)],
                                                                      [("status", "done")]))
    writer.start()
    event = first_trigger_event(rebuilt)
    writer.join()
    assert event["status"] == "success" and "'done'" in event["message"]
    assert sensor.execute_complete(NO_CONTEXT, event) == {"message": event["message"]}


def test_trigger_times_out_and_reports_errors(tablestore_airflow_conn: str, stream_table: str) -> None:
    hook_params = TablestoreHook(tablestore_airflow_conn).hook_params
    check = RowCheck.build(stream_table, {"id": "zz", "seq": 9}, None, None).as_dict()
    timeout = first_trigger_event(TablestoreRowTrigger(check=check, hook_params=hook_params, poll_interval=0.1,
                                                max_wait_seconds=0.5))
    assert timeout["status"] == "timeout"
    with pytest.raises(AirflowSensorTimeout):
        _sensor(stream_table).execute_complete(NO_CONTEXT, timeout)
    missing = RowCheck.build(unique("no_table"), {"id": "a"}, None, None).as_dict()
    error = first_trigger_event(TablestoreRowTrigger(check=missing, hook_params=hook_params, poll_interval=0.1))
    assert error["status"] == "error" and error["code"] == "OTSObjectNotExist"
    with pytest.raises(AirflowFailException, match="waiting for the row failed"):
        _sensor(stream_table).execute_complete(NO_CONTEXT, error)


def test_a_missing_table_fails_the_poke_at_once(tablestore_airflow_conn: str) -> None:
    with pytest.raises(AirflowFailException, match="OTSObjectNotExist"):
        _sensor(unique("no_table"), tablestore_airflow_conn).poke(NO_CONTEXT)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"primary_key": {}}, "primary_key must be"),
    ({"primary_key": {"id": 1.5}}, "takes INTEGER and STRING values"),
    ({"expected": "done"}, "expected needs column"),
])
def test_bad_arguments_fail_when_the_dag_is_parsed(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _sensor("t", **kwargs)
