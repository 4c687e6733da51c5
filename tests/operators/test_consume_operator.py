"""TablestoreTunnelConsumeOperator against a real emulator: every record handed over once it is through the
cutoff, the record and time bounds, a dotted-path function, server checkpoints (a second run hands over only
what is new), and arguments that fail at once."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_helpers import own_emulator, unique
from replication_helpers import make_source, stream_changes, write_key

from airflow_tablestore.client.model import Record
from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator, resolve_function
from demo import replication as demo

CTX: Any = {}
ROWS = 300

tablestore_emulator = own_emulator(["--base-channel-rows", "100", "--stream-partitions", "2"])

RECEIVED: list[Record] = []
_lock = threading.Lock()


def collect(records: list[Record]) -> None:
    """A module-level function, for the dotted-path form of ``apply_function``."""
    with _lock:
        RECEIVED.extend(records)


def _operator(conn: str, table: str, tunnel: str, **kwargs: Any) -> TablestoreTunnelConsumeOperator:
    kwargs.setdefault("apply_function", collect)
    kwargs.setdefault("heartbeat_interval", 0.5)
    return TablestoreTunnelConsumeOperator(task_id=unique("consume"), table_name=table, tunnel_name=tunnel,
                                           tablestore_conn_id=conn, **kwargs)


def test_consumes_base_data_and_changes_through_the_cutoff_then_only_what_is_new(
        tablestore_airflow_conn: str, tablestore_client: Any, tablestore_tunnel_client: Any) -> None:
    table = unique("consume_src")
    make_source(tablestore_client, tablestore_tunnel_client, table, "feed", ROWS)
    gone: set[int] = set()
    writes = demo.write_changes(tablestore_client, table, ROWS, 60, gone=gone)
    RECEIVED.clear()
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    result = _operator(tablestore_airflow_conn, table, "feed", apply_function=f"{__name__}.collect",
                       cutoff=cutoff.isoformat()).execute(CTX)
    assert result["stopped"] == "cutoff" and result["records"] == len(RECEIVED)
    assert len([r for r in RECEIVED if r.sequence is None]) == ROWS
    assert stream_changes(RECEIVED) == Counter(write_key(w) for w in writes)
    # the next run starts at the server checkpoints: only the new changes
    more = demo.write_changes(tablestore_client, table, ROWS, 40, offset=1, gone=gone)
    RECEIVED.clear()
    result = _operator(tablestore_airflow_conn, table, "feed",
                       cutoff=(datetime.now(UTC) + timedelta(seconds=1)).isoformat()).execute(CTX)
    assert stream_changes(RECEIVED) == Counter(write_key(w) for w in more)
    assert all(r.sequence is not None for r in RECEIVED)


def test_max_records_and_max_seconds_bound_a_run(tablestore_airflow_conn: str, tablestore_client: Any,
                                                  tablestore_tunnel_client: Any) -> None:
    table = unique("consume_bounded")
    make_source(tablestore_client, tablestore_tunnel_client, table, "feed", ROWS)
    RECEIVED.clear()
    result = _operator(tablestore_airflow_conn, table, "feed", max_records=50).execute(CTX)
    assert result["stopped"] == "max_records" and 50 <= result["records"] <= ROWS  # batches in flight finish
    result = _operator(tablestore_airflow_conn, table, "feed", max_seconds=3).execute(CTX)
    assert result["stopped"] == "max_seconds"
    # at least once: together the two runs handed over every base row
    assert {r.primary_key for r in RECEIVED} >= {r.primary_key for r in RECEIVED if r.sequence is None}
    assert len({r.primary_key for r in RECEIVED}) == ROWS


def test_a_failing_function_fails_the_task_and_its_batch_is_handed_over_again(
        tablestore_airflow_conn: str, tablestore_client: Any, tablestore_tunnel_client: Any) -> None:
    table = unique("consume_fail")
    make_source(tablestore_client, tablestore_tunnel_client, table, "feed", 50)

    def explode(records: list[Record]) -> None:
        raise RuntimeError("sink down")

    with pytest.raises(Exception, match="sink down|tunnel worker stopped"):
        _operator(tablestore_airflow_conn, table, "feed", apply_function=explode, max_seconds=20,
                  max_records=1).execute(CTX)
    RECEIVED.clear()
    _operator(tablestore_airflow_conn, table, "feed", max_records=50, max_seconds=60).execute(CTX)
    assert len({r.primary_key for r in RECEIVED}) == 50


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_records": 0}, "max_records must be a positive integer"),
    ({"max_seconds": 0}, "max_seconds must be a positive number"),
    ({"heartbeat_interval": -1}, "heartbeat_interval must be a positive number"),
])
def test_bad_bounds_fail_when_the_dag_is_parsed(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _operator("tablestore_default", "t", "feed", **kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cutoff": "25/11/2026 10:00"}, "is not a time: give an ISO-8601 time"),
    ({"apply_function": "no_module_here.fn"}, "cannot be imported"),
    ({"apply_function": "plain"}, "neither a callable nor a dotted path"),
])
def test_bad_arguments_fail_at_once_in_one_line(tablestore_airflow_conn: str, kwargs: dict[str, Any],
                                                message: str) -> None:
    with pytest.raises(AirflowFailException) as failed:
        _operator(tablestore_airflow_conn, "t", "feed", **kwargs).execute(CTX)
    assert message in str(failed.value) and "\n" not in str(failed.value)


def test_a_missing_tunnel_fails_at_once(tablestore_airflow_conn: str, stream_table: str) -> None:
    with pytest.raises(AirflowFailException, match="does not exist"):
        _operator(tablestore_airflow_conn, stream_table, "no_such_tunnel", max_records=1).execute(CTX)


def test_resolve_function_takes_callables_and_paths() -> None:
    assert resolve_function(collect) is collect
    assert resolve_function(f"{__name__}.collect") is collect
