"""The driver loop against a real emulator, with rounds run in-process (no Spark): phases, skips, cutoffs,
replica exactness, clear failures. Spark itself is exercised in tests/e2e."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import make_replica, make_source, replica_differences, stream_changes, write_key

from airflow_tablestore.client.model import ChannelStatus, TunnelStage
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.consumer.driver import ConsumerJob, JobError
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.consumer.reader import RoundPlan, partition_count, run_round_locally
from airflow_tablestore.spark.consumer.round_result import ChannelResult
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from airflow_tablestore.spark.sinks.tablestore import TablestoreSink
from demo import replication as demo

ROWS = 900


def local_runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
    assert spark == "no-spark"
    return run_round_locally(plan)


def job(settings: ConnectionSettings, sink: Any, *argv: str, calls: list[int] | None = None) -> ConsumerJob:
    def factory() -> str:
        if calls is not None:
            calls.append(1)
        return "no-spark"

    options = parse_args([*argv, "--heartbeat-interval", "1", "--client-timeout", "20", "--idle-wait", "0.2"])
    return ConsumerJob(options, settings, sink, factory, runner=local_runner)


def test_full_then_incremental_replicates_every_version(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                        settings: ConnectionSettings, unique: Any) -> None:
    src, dst, tunnel = unique("src"), unique("dst"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    make_replica(tablestore_client, src, dst)
    sink = TablestoreSink(settings, dst)
    base = ["--table", src, "--tunnel", tunnel, "--sink", "tablestore", "--sink-table", dst]
    summary = job(settings, sink, *base, "--phase", "full", "--records-per-channel", "250").run()
    assert summary.records == ROWS and summary.rounds >= 2 and not summary.skipped
    desc = tablestore_tunnel_client.describe_tunnel(src, tunnel)
    assert desc.tunnel.stage == TunnelStage.PROCESS_STREAM
    assert all(c.status == ChannelStatus.TERMINATED for c in desc.channels if c.channel_type == "BaseData")
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []

    writes = demo.write_changes(tablestore_client, src, ROWS, 250)
    cutoff = datetime.now(UTC).isoformat()
    summary = job(settings, sink, *base, "--phase", "incremental", "--cutoff", cutoff).run()
    assert summary.records == len(writes)
    assert replica_differences(tablestore_client, src, tablestore_client, dst) == []
    assert tablestore_tunnel_client.describe_tunnel(src, tunnel).consume_point_ns >= \
        int(datetime.fromisoformat(cutoff).timestamp() * 1e9) - 1000


def test_done_phases_exit_without_starting_spark(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                 settings: ConnectionSettings, unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 50)
    sink = ParquetSink(str(tmp_path))
    base = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", str(tmp_path)]
    calls: list[int] = []
    assert job(settings, sink, *base, "--phase", "full", calls=calls).run().records == 50
    assert calls == [1]
    again = job(settings, sink, *base, "--phase", "full", calls=calls).run()
    assert again.skipped and again.rounds == 0 and calls == [1]
    past = "2000-01-01T00:00:00Z"  # the consume point is already past it
    inc = job(settings, sink, *base, "--phase", "incremental", "--cutoff", past, calls=calls).run()
    assert inc.skipped and calls == [1]
    assert len(arrow_to_records(read_change_log(str(tmp_path)))) == 50


def test_successive_cutoffs_give_exact_union(tablestore_client: Any, tablestore_tunnel_client: Any,
                                             settings: ConnectionSettings, unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 300)
    sink = ParquetSink(str(tmp_path))
    base = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", str(tmp_path)]
    job(settings, sink, *base, "--phase", "full").run()
    gone: set[int] = set()
    before = demo.write_changes(tablestore_client, src, 300, 120, offset=1, gone=gone)
    t1 = datetime.now(UTC)
    after = demo.write_changes(tablestore_client, src, 300, 600, offset=2, gone=gone)  # > one read batch
    t2 = datetime.now(UTC)

    job(settings, sink, *base, "--phase", "incremental", "--cutoff", t1.isoformat(),
        "--records-per-channel", "40").run()
    got = stream_changes(arrow_to_records(read_change_log(str(tmp_path))))
    want_before = Counter(write_key(w) for w in before)
    assert not (want_before - got), "a change before the first cutoff is missing"
    assert not (got - want_before - Counter(write_key(w) for w in after))
    assert sum(got.values()) < len(before) + len(after), "the first run should have stopped at its cutoff"

    job(settings, sink, *base, "--phase", "incremental", "--cutoff", t2.isoformat()).run()
    union = stream_changes(arrow_to_records(read_change_log(str(tmp_path))))
    assert union == Counter(write_key(w) for w in before + after)  # nothing lost, nothing twice


def test_max_parallel_channels_rotates_through_channels(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                        settings: ConnectionSettings, unique: Any,
                                                        tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    seen: list[int] = []

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        seen.append(len(plan.tasks))
        return run_round_locally(plan)

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--max-parallel-channels", "1",
                          "--records-per-channel", "250", "--heartbeat-interval", "1", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    assert set(seen) == {1} and len(seen) == 5  # channels of 400, 400, 100 rows; 250 per round, one per round
    assert summary.records == ROWS
    assert len(arrow_to_records(read_change_log(str(tmp_path)))) == ROWS


@pytest.mark.parametrize(("channels", "tasks_per_round", "slots", "expected"), [
    (256, 0, 2, 8),  # default: 4 per task slot
    (4, 0, 2, 4),  # never more tasks than channels
    (256, 3, 2, 3),  # --tasks-per-round
    (256, 0, 0, 4),  # no slot count known: as one slot
    (0, 0, 2, 1),
])
def test_partition_count(channels: int, tasks_per_round: int, slots: int, expected: int) -> None:
    assert partition_count(channels, tasks_per_round, slots) == expected


def test_tasks_per_round_shares_the_channels_among_fewer_tasks(tablestore_client: Any,
                                                                 tablestore_tunnel_client: Any,
                                                                 settings: ConnectionSettings, unique: Any,
                                                                 tmp_path: Path) -> None:
    """Three channels over two Spark tasks: every channel is read by exactly one task of the round, and the
    change log holds every row once."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    shares: list[list[tuple[str, ...]]] = []

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        shares.append([tuple(t.channel_id for t in plan.assigned(p)) for p in range(plan.partitions)])
        rows = run_round_locally(plan)
        assert sorted(r.channel_id for r in rows) == sorted(t.channel_id for t in plan.tasks)
        return rows

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--tasks-per-round", "2", "--records-per-channel", "250",
                          "--heartbeat-interval", "1", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    first = shares[0]
    assert len(first) == 2 and sorted(c for share in first for c in share) == sorted(set(c for s in first for c in s))
    assert [len(share) for share in first] == [2, 1]  # channels of 400, 400, 100 rows
    records = arrow_to_records(read_change_log(str(tmp_path)))
    assert summary.records == ROWS == len(records) == len({tuple(r.primary_key) for r in records})


def test_missing_tunnel_is_a_clear_error(tablestore_client: Any, settings: ConnectionSettings, unique: Any,
                                         tmp_path: Path) -> None:
    src = unique("src")
    demo.create_source_table(tablestore_client, src)
    with pytest.raises(JobError, match="does not exist: create it first"):
        job(settings, ParquetSink(str(tmp_path)), "--table", src, "--tunnel", "nope", "--phase", "full",
            "--sink", "parquet", "--sink-path", str(tmp_path)).run()


def test_incremental_before_full_is_refused(tablestore_client: Any, tablestore_tunnel_client: Any,
                                            settings: ConnectionSettings, unique: Any, tmp_path: Path) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 20)
    with pytest.raises(JobError, match="run --phase full first"):
        job(settings, ParquetSink(str(tmp_path)), "--table", src, "--tunnel", tunnel, "--phase", "incremental",
            "--cutoff", datetime.now(UTC).isoformat(), "--sink", "parquet", "--sink-path", str(tmp_path)).run()


def test_missing_sink_table_fails_before_reading(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                 settings: ConnectionSettings, unique: Any) -> None:
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 20)
    calls: list[int] = []
    with pytest.raises(Exception, match="(?i)not exist|OTSObjectNotExist"):
        job(settings, TablestoreSink(settings, "no_such_table"), "--table", src, "--tunnel", tunnel,
            "--phase", "full", "--sink", "tablestore", "--sink-table", "no_such_table", calls=calls).run()
    assert calls == []
    assert all(c.status != ChannelStatus.TERMINATED
               for c in tablestore_tunnel_client.describe_tunnel(src, tunnel).channels)


def test_lost_session_reconnects_and_replays_without_duplicates(tablestore_emulator: Any, tablestore_client: Any,
                                                                tablestore_tunnel_client: Any,
                                                                settings: ConnectionSettings,
                                                                unique: Any, tmp_path: Path) -> None:
    """The server forgets the client after the first round was written (time jumps past the client timeout):
    nothing of that round is checkpointed, the driver reconnects and replays it; the change log stays exact."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    calls: list[int] = []

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        rows = run_round_locally(plan)
        calls.append(len(rows))
        if len(calls) == 1:
            tablestore_emulator.control.advance_time(300)  # > --client-timeout 20
        return rows

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--records-per-channel", "250",
                          "--heartbeat-interval", "1", "--client-timeout", "20", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    assert len(calls) >= 3 and summary.records > ROWS  # the first round was read twice
    records = arrow_to_records(read_change_log(str(tmp_path)))
    assert len(records) == ROWS
    assert len({r.primary_key for r in records}) == ROWS
    assert tablestore_tunnel_client.describe_tunnel(src, tunnel).tunnel.stage == TunnelStage.PROCESS_STREAM


def test_resource_gone_wrapped_by_spark_reconnects_and_replays(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                               settings: ConnectionSettings, unique: Any,
                                                               tmp_path: Path) -> None:
    """With real Spark a lost channel reaches the driver wrapped in a Py4J/Python task exception: the driver
    must reconnect and replay the round, not exit 1 (seen when two DAG runs consumed one tunnel at once)."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    calls: list[int] = []

    class Py4JJavaError(Exception):  # what pyspark raises in the driver for a failed task
        pass

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        calls.append(len(plan.tasks))
        if len(calls) == 1:
            raise Py4JJavaError("An error occurred while calling o123.collectToPython.\n"
                                "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                                "airflow_tablestore.client.errors.ResourceGoneError: OTSResourceGone: channel "
                                "BaseData_0 is not held by this client (HTTP 410, request id r-1)\n\tat org...")
        return run_round_locally(plan)

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--records-per-channel", "250", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    assert len(calls) >= 2
    records = arrow_to_records(read_change_log(str(tmp_path)))
    assert len(records) == ROWS == summary.records
    assert tablestore_tunnel_client.describe_tunnel(src, tunnel).tunnel.stage == TunnelStage.PROCESS_STREAM


def test_a_long_round_logs_progress(tablestore_emulator: Any, tablestore_client: Any, tablestore_tunnel_client: Any,
                                    settings: ConnectionSettings, unique: Any, tmp_path: Path,
                                    caplog: pytest.LogCaptureFixture) -> None:
    """A round is one Spark job: while it runs, the driver logs a progress line at a fixed interval (10 s by
    default; 0.2 s here), with the stream channels' checkpointed lag behind the cutoff."""
    import logging
    import time

    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 50)
    job(settings, ParquetSink(str(tmp_path / "full")), "--table", src, "--tunnel", tunnel, "--phase", "full",
        "--sink", "parquet", "--sink-path", str(tmp_path / "full")).run()
    demo.write_changes(tablestore_client, src, 50, 20)

    def slow_runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        time.sleep(1.0)
        return run_round_locally(plan)

    emulator_now = datetime.fromtimestamp(tablestore_emulator.control.state()["now_us"] / 1e6, UTC)
    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "incremental", "--cutoff",
                          emulator_now.isoformat(), "--sink", "parquet", "--sink-path", str(tmp_path / "inc"),
                          "--idle-wait", "0.2"])  # the emulator's clock: earlier tests in this module move it
    consumer = ConsumerJob(options, settings, ParquetSink(str(tmp_path / "inc")), lambda: "no-spark",
                           runner=slow_runner)
    consumer.progress_interval_s = 0.2
    with caplog.at_level(logging.INFO, logger="airflow_tablestore.spark"):
        consumer.run()
    lines = [r.getMessage() for r in caplog.records if "in progress" in r.getMessage()]
    assert lines and lines[0].startswith("round 1 in progress: ")
    assert "slowest channel checkpointed at" in lines[0] and "before the cutoff" in lines[0]


def test_a_second_consumer_waits_for_the_first_and_says_whose_channels_it_waits_for(
        tablestore_client: Any, tablestore_tunnel_client: Any, settings: ConnectionSettings, unique: Any,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two runs of the DAG on one tunnel at once: the second one waits (and logs who holds the channels) until
    the first lets go, then completes; it never fails."""
    import logging
    import threading

    from airflow_tablestore.client.tunnel.rounds import RoundSession

    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    tunnel_id = tablestore_tunnel_client.describe_tunnel(src, tunnel).tunnel.tunnel_id
    first = RoundSession(tablestore_tunnel_client, tunnel_id, heartbeat_interval=0.5, client_timeout=60,
                          client_tag="first")
    first.start()
    assert first.open_channels()  # the first consumer holds every channel
    threading.Timer(2.0, first.close).start()  # ...until it shuts down (releases them)
    with caplog.at_level(logging.INFO, logger="airflow_tablestore.spark"):
        summary = job(settings, ParquetSink(str(tmp_path)), "--table", src, "--tunnel", tunnel, "--phase", "full",
                      "--sink", "parquet", "--sink-path", str(tmp_path)).run()
    assert summary.records == ROWS
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting")]
    assert waits and f"held by {first.client_id}" in waits[0]


def test_rounds_are_bounded_by_bytes_as_well_as_records(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                        settings: ConnectionSettings, unique: Any,
                                                        tmp_path: Path) -> None:
    """--bytes-per-channel ends a channel's round once that many bytes were read (large rows would otherwise
    fill an executor with --records-per-channel rows); the rounds still replicate everything exactly once."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, ROWS)
    rows_seen: list[ChannelResult] = []

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        assert plan.max_bytes == 1
        rows = run_round_locally(plan)
        rows_seen.extend(rows)
        return rows

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--bytes-per-channel", "1", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    assert all(row.reads == 1 for row in rows_seen)  # one ReadRecords per channel and round
    assert summary.rounds > 1 and summary.records == ROWS
    assert len(arrow_to_records(read_change_log(str(tmp_path)))) == ROWS


def test_records_per_channel_is_rounded_up_to_whole_answers(tablestore_client: Any, tablestore_tunnel_client: Any,
                                                            settings: ConnectionSettings, unique: Any,
                                                            tmp_path: Path) -> None:
    """--records-per-channel ends a channel's round after the ReadRecords answer that reaches it: a checkpoint
    holds an answer's end token and the request has no record limit, so a round reads at least the bound (unless
    the channel ends first) and less than the bound plus one answer. Here one base channel of 400 rows, answers of
    150 (the module's emulator) and a bound of 200: 300 records, then the last 100 (the bound would say 200)."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 400)  # one channel (--base-channel-rows)
    rows_seen: list[ChannelResult] = []

    def runner(spark: Any, plan: RoundPlan) -> list[ChannelResult]:
        assert plan.max_records == 200
        rows = run_round_locally(plan)
        rows_seen.extend(rows)
        return rows

    options = parse_args(["--table", src, "--tunnel", tunnel, "--phase", "full", "--sink", "parquet",
                          "--sink-path", str(tmp_path), "--records-per-channel", "200", "--idle-wait", "0.2"])
    summary = ConsumerJob(options, settings, ParquetSink(str(tmp_path)), lambda: "no-spark", runner=runner).run()
    assert [row.records for row in rows_seen if row.records] == [300, 100]
    assert [row.reads for row in rows_seen if row.records] == [2, 1]
    assert summary.records == 400 and len(arrow_to_records(read_change_log(str(tmp_path)))) == 400


def test_other_spark_failures_are_not_retried_as_session_loss() -> None:
    from airflow_tablestore.spark.consumer.outcome import is_wrapped_resource_gone, resource_gone_line

    assert not is_wrapped_resource_gone(RuntimeError("Py4JJavaError: java.lang.OutOfMemoryError"))
    wrapped = RuntimeError("PythonException:\n  x\nResourceGoneError: OTSResourceGone: client gone (HTTP 410)\n")
    assert is_wrapped_resource_gone(wrapped)
    assert resource_gone_line(wrapped) == "ResourceGoneError: OTSResourceGone: client gone (HTTP 410)"


def test_expired_tunnel_fails_clearly_without_spark(tablestore_emulator: Any, tablestore_client: Any,
                                                    tablestore_tunnel_client: Any,
                                                    settings: ConnectionSettings, unique: Any,
                                                    tmp_path: Path) -> None:
    """Run last in this module: it moves the emulator clock 3 hours forward."""
    src, tunnel = unique("src"), unique("tun")
    make_source(tablestore_client, tablestore_tunnel_client, src, tunnel, 20)
    sink = ParquetSink(str(tmp_path))
    base = ["--table", src, "--tunnel", tunnel, "--sink", "parquet", "--sink-path", str(tmp_path)]
    job(settings, sink, *base, "--phase", "full").run()
    demo.write_changes(tablestore_client, src, 20, 10)
    control = tablestore_emulator.control
    control.set_retention(src, 1)
    control.advance_time(3 * 3600)
    control.trim(src)
    calls: list[int] = []
    with pytest.raises(Exception, match="(?i)expired") as info:
        cutoff = datetime.now(UTC).isoformat()
        job(settings, sink, *base, "--phase", "incremental", "--cutoff", cutoff, calls=calls).run()
    assert "recreate" in str(info.value), info.value
    assert calls == []  # failed before Spark started
