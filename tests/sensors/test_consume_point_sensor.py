"""The consume-point sensor: cutoff resolution, poke, deferral, execute_complete, fail-fast paths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import (
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferred,
)
from airflow_helpers import own_emulator, unique

from airflow_tablestore.client.epoch import parse_epoch_ns as to_epoch_ns
from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor
from airflow_tablestore.triggers.tunnel import TablestoreTunnelConsumePointTrigger

FUTURE = datetime(2999, 1, 1, tzinfo=UTC)
PAST = datetime(2000, 1, 1, tzinfo=UTC)
NO_CONTEXT: Any = {}

tablestore_emulator = own_emulator()  # these tests move the emulator's clock


def _sensor(table: str = "t", tunnel: str = "tn", conn: str = "tablestore_default",
            **kwargs: Any) -> TablestoreTunnelConsumePointSensor:
    return TablestoreTunnelConsumePointSensor(task_id=unique("wait"), table_name=table, tunnel_name=tunnel,
                                              tablestore_conn_id=conn, **kwargs)


# -- cutoff resolution ------------------------------------------------------------------------------


def test_cutoff_explicit_then_data_interval_end_then_run_after() -> None:
    end = datetime(2024, 5, 1, tzinfo=UTC)
    run_after = datetime(2024, 6, 1, tzinfo=UTC)
    dag_run = SimpleNamespace(run_after=run_after)
    scheduled: Any = {"data_interval_end": end, "dag_run": dag_run}
    manual: Any = {"data_interval_end": None, "dag_run": dag_run}
    assert _sensor(cutoff="2024-01-01T00:00:00Z").resolve_cutoff_ns(scheduled) == to_epoch_ns(
        datetime(2024, 1, 1, tzinfo=UTC))
    assert _sensor().resolve_cutoff_ns(scheduled) == to_epoch_ns(end)
    # Manual runs in Airflow 3 may have no data interval: fall back to run_after.
    assert _sensor().resolve_cutoff_ns(manual) == to_epoch_ns(run_after)
    assert _sensor(cutoff="").resolve_cutoff_ns(manual) == to_epoch_ns(run_after)


def test_template_fields_and_default_deferrable_follows_config() -> None:
    assert {"tablestore_conn_id", "table_name", "tunnel_name", "cutoff"} <= set(
        TablestoreTunnelConsumePointSensor.template_fields)
    assert _sensor().deferrable is False  # [operators] default_deferrable is unset in the test environment
    assert _sensor(deferrable=True).deferrable is True


# -- against the emulator ---------------------------------------------------------------------------


@pytest.fixture
def stream_tunnel(stream_table: str, tablestore_tunnel_client: Any) -> tuple[str, str]:
    tablestore_tunnel_client.create_tunnel(stream_table, "st", TunnelType.STREAM)
    return stream_table, "st"


def test_poke_false_then_true(tablestore_airflow_conn: str, stream_tunnel: tuple[str, str]) -> None:
    table, tunnel = stream_tunnel
    waiting = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=FUTURE).poke(NO_CONTEXT)
    assert waiting.is_done is False and waiting.xcom_value is None
    # The tunnel's starting consume point is its creation time, which is past a cutoff in 2000.
    done = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=PAST).poke(NO_CONTEXT)
    assert done.is_done is True and done.xcom_value is not None
    assert done.xcom_value["consume_point_ns"] >= to_epoch_ns(PAST)


def test_a_tunnel_created_after_the_cutoff_says_there_was_nothing_to_wait_for(
    tablestore_airflow_conn: str, stream_tunnel: tuple[str, str]
) -> None:
    table, tunnel = stream_tunnel
    done = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=PAST).poke(NO_CONTEXT)
    assert done.is_done and done.xcom_value is not None
    line = done.xcom_value["message"]  # the line poke() logs
    assert "nothing before the cutoff to wait for" in line and "after the cutoff 2000-01-01" in line
    assert "\n" not in line
    waiting = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=FUTURE).poke(NO_CONTEXT)
    assert waiting.is_done is False


@pytest.mark.parametrize("cutoff", ["25/11/2026 10:00", "yesterday", "2026-13-45T00:00:00Z"])
def test_a_malformed_cutoff_fails_at_once_in_one_line(cutoff: str) -> None:
    with pytest.raises(AirflowFailException) as failed:
        _sensor(cutoff=cutoff).resolve_cutoff_ns(NO_CONTEXT)
    message = str(failed.value)
    assert repr(cutoff) in message and "ISO-8601" in message and "\n" not in message


def test_poke_fails_fast_on_a_wrong_secret(tablestore_emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from airflow_tablestore.client.errors import AuthError

    conn = json.loads(tablestore_emulator.airflow_connection_json())
    conn["password"] = "not-the-secret"
    monkeypatch.setenv("AIRFLOW_CONN_TS_WRONG_SECRET", json.dumps(conn))
    with pytest.raises(AirflowFailException, match="OTSAuthFailed") as info:  # no retries, no more pokes
        _sensor("t", "tn", "ts_wrong_secret", cutoff=PAST).poke(NO_CONTEXT)
    assert isinstance(info.value.__cause__, AuthError)


def test_poke_fails_fast_on_missing_tunnel(tablestore_airflow_conn: str, stream_table: str) -> None:
    with pytest.raises(AirflowFailException, match="does not exist"):
        _sensor(stream_table, unique("missing"), tablestore_airflow_conn, cutoff=PAST).poke(NO_CONTEXT)


def test_expired_tunnel_fails_fast_with_advice(
    tablestore_airflow_conn: str, stream_tunnel: tuple[str, str], tablestore_client: Any, tablestore_emulator: Any
) -> None:
    table, tunnel = stream_tunnel
    tablestore_client.put_row(table, (("id", "x"), ("seq", 1)), [("v", 1)])
    control = tablestore_emulator.control
    control.set_retention(table, 1)
    control.advance_time(3 * 3600)  # nobody consumed: the retention trims the change the tunnel still needed
    control.trim(table)
    with pytest.raises(AirflowFailException, match="expired.*delete and recreate"):
        _sensor(table, tunnel, tablestore_airflow_conn, cutoff=PAST).poke(NO_CONTEXT)
    with pytest.raises(AirflowFailException, match="expired"):
        _sensor(table, tunnel, tablestore_airflow_conn, cutoff=FUTURE, deferrable=True).execute(NO_CONTEXT)


def test_deferrable_execute_defers_with_complete_hook_configuration(
    tablestore_airflow_conn: str, stream_tunnel: tuple[str, str]
) -> None:
    table, tunnel = stream_tunnel
    sensor = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=FUTURE, deferrable=True, poke_interval=7,
                     timeout=600, region="cn-test")
    with pytest.raises(TaskDeferred) as info:
        sensor.execute(NO_CONTEXT)
    deferred = info.value
    assert deferred.method_name == "execute_complete"
    trigger = deferred.trigger
    assert isinstance(trigger, TablestoreTunnelConsumePointTrigger)
    assert trigger.cutoff_ns == to_epoch_ns(FUTURE)
    assert trigger.poll_interval == 7 and trigger.max_wait_seconds == 600
    assert trigger.hook_params == sensor.hook.hook_params
    assert trigger.hook_params["tablestore_conn_id"] == tablestore_airflow_conn
    assert trigger.hook_params["region"] == "cn-test"
    assert sensor.hook._client is None  # the check's client is closed before the task defers


def test_deferrable_execute_returns_at_once_when_already_done(
    tablestore_airflow_conn: str, stream_tunnel: tuple[str, str]
) -> None:
    table, tunnel = stream_tunnel
    result = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=PAST, deferrable=True).execute(NO_CONTEXT)
    assert result["consume_point_ns"] >= to_epoch_ns(PAST)


def test_deferrable_execute_fails_fast_on_missing_tunnel(tablestore_airflow_conn: str, stream_table: str) -> None:
    with pytest.raises(AirflowFailException, match="does not exist"):
        _sensor(stream_table, "nope", tablestore_airflow_conn, cutoff=FUTURE, deferrable=True).execute(NO_CONTEXT)


# -- execute_complete -------------------------------------------------------------------------------


def test_execute_complete_success_returns_payload() -> None:
    event = {"status": "success", "table_name": "t", "tunnel_name": "tn", "cutoff_ns": 1, "tunnel_id": "id",
             "tunnel_type": "Stream", "consume_point_ns": 5, "consume_point": None, "message": "ok"}
    assert _sensor().execute_complete(NO_CONTEXT, event) == {
        "tunnel_id": "id", "tunnel_type": "Stream", "consume_point_ns": 5, "consume_point": None, "message": "ok"}


def test_execute_complete_error_and_timeout_raise() -> None:
    with pytest.raises(AirflowFailException, match="tunnel gone"):
        _sensor().execute_complete(NO_CONTEXT,
                                   {"status": "error", "code": "OTSParameterInvalid", "message": "tunnel gone"})
    with pytest.raises(AirflowSensorTimeout, match="did not reach"):
        _sensor().execute_complete(NO_CONTEXT, {"status": "timeout", "message": "did not reach the cutoff"})
    with pytest.raises(AirflowSkipException):
        _sensor(soft_fail=True).execute_complete(NO_CONTEXT, {"status": "timeout", "message": "late"})
    with pytest.raises(AirflowFailException):
        _sensor().execute_complete(NO_CONTEXT, None)


def test_poke_mode_execute_returns_xcom(tablestore_airflow_conn: str, stream_tunnel: tuple[str, str]) -> None:
    table, tunnel = stream_tunnel
    sensor = _sensor(table, tunnel, tablestore_airflow_conn, cutoff=PAST, deferrable=False, poke_interval=0.1,
                     timeout=timedelta(seconds=60))
    context: Any = {"ti": SimpleNamespace(try_number=1)}
    result = sensor.execute(context)
    assert result["consume_point_ns"] >= to_epoch_ns(PAST)
    assert sensor.hook._client is None  # the pokes' client is closed when execute ends


def test_default_deferrable_config_switches_the_default() -> None:
    """``[operators] default_deferrable = True`` makes the sensor deferrable without an argument."""
    import os
    import subprocess
    import sys

    code = ("from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor as S; "
            "print(S(task_id='w', table_name='t', tunnel_name='tn').deferrable)")
    env = dict(os.environ, AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE="True")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "True"
