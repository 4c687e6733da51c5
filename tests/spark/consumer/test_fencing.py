"""Fenced writes: a stale driver's executors and a write the server executes after the client gave up never
roll the destination back, and never make two change-log files disagree (issue 11, item 2).

Each scenario also runs with the fence off and checks that the destination *is* rolled back: the test can
tell the difference, so the fenced run proves something."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_replica, make_source, replica_differences, stream_changes, write_key

from airflow_tablestore.client.model import Column, Record, RowWrite, WriteType
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.consumer.driver import ConsumerJob
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.consumer.reader import RoundPlan, run_round_locally
from airflow_tablestore.spark.consumer.round_result import ChannelResult
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from airflow_tablestore.spark.sinks.protocol import ChannelWriter, Sink
from airflow_tablestore.spark.sinks.tablestore import TablestoreSink
from demo import replication as demo

HOT_ROWS = 40


def hot_changes(table: str, generation: int, n: int) -> list[RowWrite]:
    """``n`` changes cycling over ``HOT_ROWS`` rows: puts, updates and deletes (then re-puts) of the same rows,
    each generation with new values, so an older change applied late leaves a visibly older row."""
    writes = []
    for k in range(n):
        pk = demo.pk_of(k % HOT_ROWS)
        kind = (k // HOT_ROWS + generation) % 3
        ts = demo.BASE_TS + 20_000_000 + generation * 100_000 + k  # explicit versions: comparable changes
        if kind == 0:
            writes.append(RowWrite(table, WriteType.PUT, pk, (Column("name", f"g{generation}-{k}", ts),
                                                               Column("count", k, ts))))
        elif kind == 1:
            writes.append(RowWrite(table, WriteType.UPDATE, pk, (Column("count", generation * 1000 + k, ts),)))
        else:
            writes.append(RowWrite(table, WriteType.DELETE, pk))
    return writes


def options(*argv: str) -> Any:
    return parse_args([*argv, "--heartbeat-interval", "1", "--client-timeout", "20", "--idle-wait", "0.2"])


def local_runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
    return run_round_locally(plan)


@dataclasses.dataclass(frozen=True)
class StallingSink:
    """Wraps a sink: the first writer opened blocks in its first ``write`` until ``release`` is set (an executor
    of a driver that is about to lose its channels, stalled after it read)."""

    inner: Any
    stalled: threading.Event
    release: threading.Event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open(self, channel_id: str, start_token: str, sequence: int) -> ChannelWriter:
        return _StallingWriter(self.inner.open(channel_id, start_token, sequence), self.stalled, self.release)


class _StallingWriter:
    def __init__(self, inner: ChannelWriter, stalled: threading.Event, release: threading.Event) -> None:
        self.inner, self.stalled, self.release = inner, stalled, release

    @property
    def refused(self) -> int:
        return self.inner.refused

    def write(self, records: Sequence[Record]) -> None:
        if not self.stalled.is_set():
            self.stalled.set()
            assert self.release.wait(120), "never released"
        self.inner.write(records)

    def close(self, end_token: str) -> int:
        return self.inner.close(end_token)

    def abort(self) -> None:
        self.inner.abort()


def emulator_now(tablestore_emulator: EmulatorProcess) -> str:
    now_us = int(tablestore_emulator.control.state()["now_us"])
    return datetime.fromtimestamp(now_us / 1e6 + 0.001, tz=UTC).isoformat()


def run_stale_driver_scenario(tablestore_emulator: EmulatorProcess, tablestore_client: Any,
                              tablestore_tunnel_client: Any, settings: ConnectionSettings, src: str, tunnel: str,
                              sink: Sink, args: list[str]) -> tuple[list[RowWrite], ConsumerJob]:
    """Driver A reads the first changes and stalls before writing; newer changes arrive; A's client times out;
    driver B takes the channels over and replicates everything; then A's executors write their (old) records
    and A carries on. Returns the changes written and driver B."""
    ConsumerJob(options(*args, "--phase", "full"), settings, sink, lambda: "no-spark", runner=local_runner).run()
    older = hot_changes(src, 1, 4 * HOT_ROWS)
    demo.apply_writes(tablestore_client, older)

    stalled, release = threading.Event(), threading.Event()

    def stalling_runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        return run_round_locally(dataclasses.replace(plan, sink=StallingSink(plan.sink, stalled, release)))

    far = datetime(2100, 1, 1, tzinfo=UTC).isoformat()
    driver_a = ConsumerJob(options(*args, "--phase", "incremental", "--cutoff", far, "--max-rounds", "3"),
                           settings, sink, lambda: "no-spark", runner=stalling_runner)
    outcome: list[BaseException | None] = []

    def run_a() -> None:
        try:
            driver_a.run()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=run_a, daemon=True)
    thread.start()
    try:
        assert stalled.wait(60), "driver A never read"
        newer = hot_changes(src, 2, 4 * HOT_ROWS)
        demo.apply_writes(tablestore_client, newer)
        tablestore_emulator.control.advance_time(30)  # A's tunnel client (timeout 20 s) is now dead
        driver_b = ConsumerJob(options(*args, "--phase", "incremental", "--cutoff", emulator_now(tablestore_emulator)),
                               settings, sink, lambda: "no-spark", runner=local_runner)
        driver_b.run()
    finally:
        release.set()  # A's executors wake up and write what they read before the takeover
        thread.join(120)
    assert outcome == [None], outcome  # A notices it lost the session, reconnects, and finds nothing left
    return older + newer, driver_b


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced-control"])
def test_stale_driver_cannot_roll_the_replica_back(tablestore_emulator: EmulatorProcess, tablestore_client: Any,
                                                   tablestore_tunnel_client: Any, settings: ConnectionSettings,
                                                   unique: Any, fenced: bool) -> None:
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, HOT_ROWS)
    make_replica(tablestore_client, src, dst)
    fence = "_tunnel_seq" if fenced else ""
    sink = TablestoreSink(settings, dst, fence_column=fence)
    args = ["--table", src, "--tunnel", tunnel, "--sink", "tablestore", "--sink-table", dst, "--fence-column", fence]
    run_stale_driver_scenario(tablestore_emulator, tablestore_client, tablestore_tunnel_client, settings, src, tunnel,
                              sink, args)
    problems = replica_differences(tablestore_client, src, tablestore_client, dst)
    if fenced:
        assert problems == []
    else:
        assert problems, "the unfenced control run should show the stale driver's rollback"


def test_stale_driver_cannot_publish_a_second_version_of_a_change(
        tablestore_emulator: EmulatorProcess, tablestore_client: Any, tablestore_tunnel_client: Any,
        settings: ConnectionSettings, unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    path = str(tmp_path / "log")
    sink = ParquetSink(path)
    args = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", path]
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, HOT_ROWS)
    writes, _ = run_stale_driver_scenario(tablestore_emulator, tablestore_client, tablestore_tunnel_client,
                                          settings, src, tunnel, sink, args)
    got = stream_changes(arrow_to_records(read_change_log(path)))
    assert got == Counter(write_key(w) for w in writes)  # every change exactly once
    # The stale round's file stays staged (hidden) until a recovery drops it; it is never published.
    ConsumerJob(options(*args, "--phase", "incremental", "--cutoff", emulator_now(tablestore_emulator)),
                settings, sink, lambda: "no-spark", runner=local_runner).run()
    assert stream_changes(arrow_to_records(read_change_log(path))) == got


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced-control"])
def test_a_write_executed_after_its_client_gave_up_is_refused(
        tablestore_emulator: EmulatorProcess, tablestore_client: Any, tablestore_tunnel_client: Any,
        settings: ConnectionSettings, unique: Any, fenced: bool) -> None:
    """The emulator holds the sink's first BatchWriteRow for 6 s and then executes it; the client gave up
    after 2 s, re-sent it and went on writing newer changes of the same rows."""
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, HOT_ROWS)
    make_replica(tablestore_client, src, dst)
    fence = "_tunnel_seq" if fenced else ""
    sink = TablestoreSink(settings, dst, request_timeout=2.0, fence_column=fence)
    args = ["--table", src, "--tunnel", tunnel, "--sink", "tablestore", "--sink-table", dst, "--fence-column", fence]
    ConsumerJob(options(*args, "--phase", "full"), settings, sink, lambda: "no-spark", runner=local_runner).run()
    for generation in range(3):
        demo.apply_writes(tablestore_client, hot_changes(src, generation, 5 * HOT_ROWS))
    control = tablestore_emulator.control
    control.add_fault("/BatchWriteRow", None, delay_s=6.0)
    try:
        ConsumerJob(options(*args, "--phase", "incremental", "--cutoff", emulator_now(tablestore_emulator),
                            "--request-timeout", "2"), settings, sink, lambda: "no-spark", runner=local_runner).run()
        assert control.state()["faults"] == []  # the held request was sent
        time.sleep(6.5)  # ... and has now been executed, late
    finally:
        control.clear_faults()
    problems = replica_differences(tablestore_client, src, tablestore_client, dst)
    if fenced:
        assert problems == []
    else:
        assert problems, "the unfenced control run should show the late write's rollback"


def add_random_faults(control: Any, *, seed: int, timeout_delay_s: float) -> None:
    """~10% of every API request fails: 5% OTSServerBusy, 3% OTSTimeout (503), 2% held past the client's
    request timeout and then executed late."""
    control.add_fault("*", "OTSServerBusy", count=10**6, probability=0.05, seed=seed)
    control.add_fault("*", "OTSTimeout", message="Request timeout.", count=10**6, probability=0.03 / 0.95)
    control.add_fault("*", None, count=10**6, delay_s=timeout_delay_s, probability=0.02 / 0.92)


@pytest.mark.parametrize("sink_type", ["tablestore", "parquet"])
def test_replication_completes_under_ten_percent_faults(tablestore_emulator: EmulatorProcess, tablestore_client: Any,
                                                        tablestore_tunnel_client: Any, settings: ConnectionSettings,
                                                        unique: Any, tmp_path: Path, sink_type: str) -> None:
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 600)
    make_replica(tablestore_client, src, dst)
    path = str(tmp_path / "log")
    sink: Sink = TablestoreSink(settings, dst, request_timeout=2.0) if sink_type == "tablestore" else ParquetSink(path)
    args = ["--table", src, "--tunnel", tunnel, "--sink", sink_type, "--records-per-channel", "200",
            "--request-timeout", "2", "--client-timeout", "20",
            *(["--sink-table", dst] if sink_type == "tablestore" else ["--sink-path", path])]
    writes = demo.change_writes(src, 600, 300)
    control = tablestore_emulator.control
    add_random_faults(control, seed=7, timeout_delay_s=2.5)
    try:
        ConsumerJob(options(*args, "--phase", "full"), settings, sink, lambda: "no-spark", runner=local_runner).run()
        control.clear_faults()
        demo.apply_writes(tablestore_client, writes)
        cutoff = emulator_now(tablestore_emulator)
        add_random_faults(control, seed=8, timeout_delay_s=2.5)
        ConsumerJob(options(*args, "--phase", "incremental", "--cutoff", cutoff), settings, sink, lambda: "no-spark",
                    runner=local_runner).run()
    finally:
        control.clear_faults()
    time.sleep(3)  # requests held by the fault are executed late: let them land before comparing
    if sink_type == "tablestore":
        assert replica_differences(tablestore_client, src, tablestore_client, dst) == []
    else:
        assert stream_changes(arrow_to_records(read_change_log(path))) == Counter(write_key(w) for w in writes)
