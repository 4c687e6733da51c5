"""The asset-watcher trigger against the emulator: thresholds (records, delay), one event per batch, no event twice
for reported changes, counting again from the consume point after re-creation, and errors that never fire."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_helpers import collecting_worker, unique

from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.triggers.changes import TablestoreTunnelChangesTrigger


class Driver:
    """Runs a trigger's ``run()`` on its own event loop as the triggerer does (events go to a queue), only while
    :meth:`next_event` waits, so the test can write rows in between."""

    def __init__(self, trigger: TablestoreTunnelChangesTrigger) -> None:
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = self.loop.create_task(self._pump(trigger))

    async def _pump(self, trigger: TablestoreTunnelChangesTrigger) -> None:
        async for event in trigger.run():
            self.queue.put_nowait(dict(event.payload))

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        """The next event, or None when none came within ``timeout`` seconds."""
        async def get() -> dict[str, Any] | None:
            try:
                return await asyncio.wait_for(self.queue.get(), timeout)
            except TimeoutError:
                return None

        event = self.loop.run_until_complete(get())
        assert not self.task.done(), "the trigger must run until Airflow stops it"
        return event

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)
        self.loop.close()


@pytest.fixture
def drive() -> Iterator[Any]:
    drivers: list[Driver] = []

    def start(trigger: TablestoreTunnelChangesTrigger) -> Driver:
        drivers.append(Driver(trigger))
        return drivers[-1]

    yield start
    for driver in drivers:
        driver.close()


def _trigger(table: str, tunnel: str, conn: str, **kwargs: Any) -> TablestoreTunnelChangesTrigger:
    kwargs.setdefault("poll_interval", 0.1)
    return TablestoreTunnelChangesTrigger(table_name=table, tunnel_name=tunnel,
                                          hook_params=TablestoreTunnelHook(conn).hook_params, **kwargs)


def _write(client: Any, table: str, keys: range) -> None:
    for i in keys:
        client.put_row(table, (("id", f"k{i}"), ("seq", i)), [("v", i)])


def test_serialize_round_trip_and_a_stable_hash() -> None:
    hook_params = TablestoreTunnelHook("conn_x", region="cn-beijing", read_timeout=9.0).hook_params
    trigger = TablestoreTunnelChangesTrigger(table_name="t", tunnel_name="tn", min_records=10, max_delay=60,
                                             poll_interval=5, hook_params=hook_params)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    assert getattr(importlib.import_module(module), name) is TablestoreTunnelChangesTrigger
    kwargs = json.loads(json.dumps(kwargs))
    rebuilt = TablestoreTunnelChangesTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    # Airflow keeps one trigger row per asset watcher by this hash: it must not change between parses
    assert TablestoreTunnelChangesTrigger.hash(*rebuilt.serialize()) == TablestoreTunnelChangesTrigger.hash(
        *trigger.serialize())


@pytest.mark.parametrize("bad", [{"min_records": 0}, {"max_delay": 0}, {"poll_interval": -1}, {"min_records": 1.5}])
def test_bad_thresholds_fail_when_the_dag_is_parsed(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        TablestoreTunnelChangesTrigger(table_name="t", tunnel_name="tn", **bad)


def test_one_event_per_batch_and_none_for_reported_changes(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any,
    drive: Any,
) -> None:
    tunnel_id = tablestore_tunnel_client.create_tunnel(stream_table, "watch", TunnelType.STREAM)
    driver = drive(_trigger(stream_table, "watch", tablestore_airflow_conn, min_records=10, max_delay=3600))
    _write(tablestore_client, stream_table, range(4))
    assert driver.next_event(1.0) is None  # 4 < min_records, and young
    _write(tablestore_client, stream_table, range(4, 60))  # a burst: 60 changes in all
    event = driver.next_event(10)
    assert event is not None
    assert event["reason"] == "min_records" and event["records"] >= 10 and event["caught_up"]
    assert event["tunnel_id"] == tunnel_id and event["table_name"] == stream_table
    assert event["first_change_ns"] <= event["last_change_ns"]
    assert event["first_change"].startswith("20") and event["consume_point_ns"] > 0
    # a poll that was already reading when the burst began sees part of it: then a second event has the rest
    events = [event]
    while (more := driver.next_event(1.0)) is not None:
        events.append(more)
    assert sum(e["records"] for e in events) == 60 and len(events) <= 2, events  # batched, each change once
    event = events[-1]
    _write(tablestore_client, stream_table, range(100, 110))
    again = driver.next_event(10)
    assert again is not None and again["records"] == 10  # only the new ones
    assert again["first_change_ns"] > event["last_change_ns"]


def test_a_few_changes_fire_once_the_oldest_waited_max_delay(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any,
    drive: Any,
) -> None:
    tablestore_tunnel_client.create_tunnel(stream_table, "quiet", TunnelType.STREAM)
    driver = drive(_trigger(stream_table, "quiet", tablestore_airflow_conn, min_records=1000, max_delay=1.5))
    started = time.time()
    _write(tablestore_client, stream_table, range(2))
    event = driver.next_event(10)
    assert event is not None and event["reason"] == "max_delay" and event["records"] == 2
    assert time.time() - started >= 1.4
    assert driver.next_event(2.0) is None


def test_a_new_instance_counts_again_from_the_consume_point(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any,
    drive: Any,
) -> None:
    """A triggerer restart builds the trigger again from its kwargs: whatever nobody consumed is reported again
    (none lost); what the tunnel's consumer checkpointed is not."""
    tunnel_id = tablestore_tunnel_client.create_tunnel(stream_table, "restart", TunnelType.STREAM)
    trigger = _trigger(stream_table, "restart", tablestore_airflow_conn, min_records=20, max_delay=3600)
    first = drive(trigger)
    _write(tablestore_client, stream_table, range(25))
    event = first.next_event(10)
    assert event is not None and event["records"] == 25
    first.close()  # the triggerer died: the event's memory is gone

    classpath, kwargs = trigger.serialize()
    second = drive(TablestoreTunnelChangesTrigger(**json.loads(json.dumps(kwargs))))
    again = second.next_event(10)
    assert again is not None and again["records"] == 25  # nobody consumed them: reported again
    assert (again["first_change_ns"], again["last_change_ns"]) == (event["first_change_ns"], event["last_change_ns"])
    second.close()

    with collecting_worker(tablestore_tunnel_client, tunnel_id) as seen:
        deadline = time.monotonic() + 30
        hook = TablestoreTunnelHook(tablestore_airflow_conn)
        while time.monotonic() < deadline and hook.get_consume_point(stream_table, "restart") <= \
                again["last_change_ns"]:
            time.sleep(0.2)
    assert len(seen) == 25  # the consumer has them now, and the tunnel's consume point is past them
    third = drive(TablestoreTunnelChangesTrigger(**kwargs))
    assert third.next_event(1.5) is None  # consumed changes are not pending
    _write(tablestore_client, stream_table, range(200, 221))
    latest = third.next_event(10)
    assert latest is not None and latest["records"] == 21 and latest["consume_point_ns"] > again["last_change_ns"]


def test_the_trigger_never_consumes_the_tunnel(
    tablestore_airflow_conn: str, stream_table: str, tablestore_client: Any, tablestore_tunnel_client: Any,
    drive: Any,
) -> None:
    tablestore_tunnel_client.create_tunnel(stream_table, "untouched", TunnelType.STREAM)
    driver = drive(_trigger(stream_table, "untouched", tablestore_airflow_conn, min_records=5, max_delay=3600))
    _write(tablestore_client, stream_table, range(5))
    assert driver.next_event(10) is not None
    description = tablestore_tunnel_client.describe_tunnel(stream_table, "untouched")
    assert all(not channel.client_id for channel in description.channels)  # no channel taken from a consumer


def test_errors_are_logged_and_never_fire(tablestore_airflow_conn: str, stream_table: str, drive: Any,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    missing = unique("missing")
    driver = drive(_trigger(stream_table, missing, tablestore_airflow_conn, min_records=1, max_delay=0.1))
    assert driver.next_event(1.0) is None  # an event would start a DAG run: errors only log, and it goes on
    unknown = drive(TablestoreTunnelChangesTrigger(
        table_name="t", tunnel_name="tn", poll_interval=0.1,
        hook_params={"tablestore_conn_id": "no_such_conn_" + unique("c")}))
    assert unknown.next_event(1.0) is None
    logged = "".join(capfd.readouterr())  # the triggers' (structlog) log lines
    assert f"tunnel {missing!r} on table {stream_table!r} does not exist" in logged, logged[-2000:]
    assert "no_such_conn_" in logged and "is not defined" in logged


def test_a_connection_fixed_while_it_runs_is_read_again(tablestore_emulator: Any, stream_table: str,
                                                        tablestore_client: Any, tablestore_tunnel_client: Any,
                                                        drive: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rotated secret (or an expired STS token) fails every poll until the connection is read again: after an
    error the trigger reads it again, so fixing the connection is enough, no triggerer restart."""
    tablestore_tunnel_client.create_tunnel(stream_table, "rotated", TunnelType.STREAM)
    conn = json.loads(tablestore_emulator.airflow_connection_json())
    good = json.dumps(conn)
    conn["password"] = "an-old-secret"
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_ROTATED", json.dumps(conn))
    driver = drive(_trigger(stream_table, "rotated", "tablestore_rotated", min_records=3, max_delay=3600))
    _write(tablestore_client, stream_table, range(3))
    assert driver.next_event(1.0) is None  # OTSAuthFailed at every poll
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_ROTATED", good)
    event = driver.next_event(10)
    assert event is not None and event["records"] == 3
