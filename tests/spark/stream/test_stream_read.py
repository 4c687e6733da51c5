"""The tunnel as a streaming source against a real emulator and real Spark: base data then every stream change,
exactly once, with the server checkpoints moved after Spark commits."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from replication_helpers import make_source, stream_changes, write_key

from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.cutoff import STREAM
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.stream.output import change_log_schema
from demo import replication as demo

ROWS = 900


def stream_reader(spark: Any, connection: dict[str, str], table: str, tunnel: str, **options: Any) -> Any:
    reader = spark.readStream.format("tablestore").options(**connection).option("table", table) \
        .option("tunnel", tunnel).option("settle_ms", "200")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def run_available_now(spark: Any, connection: dict[str, str], table: str, tunnel: str, out: Path,
                      checkpoint: Path, **options: Any) -> Any:
    query = stream_reader(spark, connection, table, tunnel, **options).load().writeStream.format("parquet") \
        .option("path", str(out)).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return query


def read_changes(out: Path) -> list[Any]:
    return arrow_to_records(pq.read_table(str(out))) if out.exists() else []


@pytest.fixture(scope="module")
def source(client: TableClient, settings: ConnectionSettings) -> Any:
    """A table with base rows and a tunnel on it; yields (writes so far, the `gone` set of deleted rows)."""
    with settings.tunnel_client() as tunnel_client:
        make_source(client, tunnel_client, "stream_src", "feed", ROWS)
    gone: set[int] = set()  # rows deleted once are never written again: every write is one stream record
    return [], gone


def test_available_now_reads_base_then_stream_exactly_once(spark: Any, connection: dict[str, str],
                                                           client: TableClient, settings: ConnectionSettings,
                                                           source: Any, tmp_path: Path) -> None:
    writes, gone = source
    writes += demo.write_changes(client, "stream_src", ROWS, 300, gone=gone)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = run_available_now(spark, connection, "stream_src", "feed", out, checkpoint,
                              max_records_per_trigger=500, max_tasks_per_batch=1)  # one task reads every span
    records = read_changes(out)
    base = [r for r in records if r.sequence is None]
    assert len(base) == ROWS and len({r.primary_key for r in base}) == ROWS
    assert stream_changes(records) == Counter(write_key(w) for w in writes)
    # the read limit bounds every batch (base and stream)
    assert max(p["numInputRows"] for p in query.recentProgress) <= 500
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 3
    # more changes, the same query again: exactly the new ones
    more = demo.write_changes(client, "stream_src", ROWS, 200, offset=1, gone=gone)
    writes += more
    run_available_now(spark, connection, "stream_src", "feed", out, checkpoint)
    assert stream_changes(read_changes(out)) == Counter(write_key(w) for w in writes)
    # the server checkpoints are where Spark is: every stream channel past the newest change read
    newest_ns = max(r.sequence.timestamp for r in read_changes(out) if r.sequence) * 1000
    with settings.tunnel_client() as tunnel_client:
        desc = tunnel_client.describe_tunnel("stream_src", "feed")
    live = [c for c in desc.channels if c.channel_type == STREAM and c.status != ChannelStatus.TERMINATED]
    assert live and all(c.consume_point_ns >= newest_ns - 1_000_000_000 for c in live), (live, newest_ns)


def test_a_query_without_its_checkpoint_resumes_from_the_servers(spark: Any, connection: dict[str, str],
                                                                 client: TableClient, source: Any,
                                                                 tmp_path: Path) -> None:
    writes, gone = source
    if not writes:  # run alone: consume what there is first
        run_available_now(spark, connection, "stream_src", "feed", tmp_path / "first", tmp_path / "ck-first")
    run_available_now(spark, connection, "stream_src", "feed", tmp_path / "empty", tmp_path / "ck-empty")
    assert read_changes(tmp_path / "empty") == []
    new = demo.write_changes(client, "stream_src", ROWS, 120, offset=2, gone=gone)
    writes += new
    run_available_now(spark, connection, "stream_src", "feed", tmp_path / "new", tmp_path / "ck-new",
                      max_records_per_trigger=7)  # spans end inside answers: resumed at exact positions
    assert stream_changes(read_changes(tmp_path / "new")) == Counter(write_key(w) for w in new)


def test_flat_schema_has_typed_columns_and_the_action(spark: Any, connection: dict[str, str], client: TableClient,
                                                      source: Any, tmp_path: Path) -> None:
    writes, gone = source
    run_available_now(spark, connection, "stream_src", "feed", tmp_path / "skip", tmp_path / "ck-skip")
    new = demo.write_changes(client, "stream_src", ROWS, 50, offset=3, gone=gone)
    writes += new
    frame = stream_reader(spark, connection, "stream_src", "feed") \
        .schema("region string, id long, name string, score double, _action string").load()
    query = frame.writeStream.format("memory").queryName("flat_changes").trigger(availableNow=True).start()
    query.awaitTermination(300)
    rows = spark.sql("select * from flat_changes").collect()
    assert Counter(r["_action"] for r in rows) == Counter(
        {"PUT": "PUT_ROW", "UPDATE": "UPDATE_ROW", "DELETE": "DELETE_ROW"}[w.type.value] for w in new)
    assert {(r["region"], r["id"]) for r in rows} == {tuple(v for _, v in w.primary_key) for w in new}
    puts = {(w.primary_key[0][1], w.primary_key[1][1]): w for w in new if w.type.value == "PUT"}
    for row in rows:
        write = puts.get((row["region"], row["id"]))
        if write is not None:
            assert row["name"] == dict((c.name, c.value) for c in write.columns).get("name")


def test_processing_time_query_follows_new_changes(spark: Any, connection: dict[str, str], client: TableClient,
                                                   source: Any, tmp_path: Path) -> None:
    writes, gone = source
    run_available_now(spark, connection, "stream_src", "feed", tmp_path / "live", tmp_path / "ck")

    def committed() -> Counter[Any]:  # the files of committed batches only (the sink's metadata log)
        frame = spark.read.schema(change_log_schema()).parquet(str(tmp_path / "live"))
        return stream_changes(arrow_to_records(frame.toArrow()))

    before = committed()
    query = stream_reader(spark, connection, "stream_src", "feed").load().writeStream.format("parquet") \
        .option("path", str(tmp_path / "live")).option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(processingTime="1 second").start()
    try:
        new = demo.write_changes(client, "stream_src", ROWS, 80, offset=4, gone=gone)
        writes += new
        expected = before + Counter(write_key(w) for w in new)

        deadline = time.monotonic() + 120
        while committed() != expected and time.monotonic() < deadline:
            time.sleep(1)
    finally:
        query.stop()
    assert query.exception() is None
    assert committed() == expected


@pytest.mark.parametrize(("options", "message"), [
    ({"tunnel": "no_such_tunnel"}, "tunnel 'no_such_tunnel' of table 'stream_src' does not exist"),
    ({"tunnel": "feed", "max_records_per_trigger": "0"}, "'max_records_per_trigger' must be at least 1"),
])
def test_bad_options_fail_with_a_clear_message(spark: Any, connection: dict[str, str], source: Any,
                                               tmp_path: Path, options: dict[str, str], message: str) -> None:
    reader = spark.readStream.format("tablestore").options(**connection).option("table", "stream_src")
    query = None
    with pytest.raises(Exception) as raised:
        for key, value in options.items():
            reader = reader.option(key, value)
        query = reader.load().writeStream.format("console").option(
            "checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
        query.awaitTermination(120)
    assert message in str(raised.value)


def test_tunnel_option_on_a_batch_read_says_use_read_stream(spark: Any, connection: dict[str, str],
                                                            source: Any) -> None:
    with pytest.raises(Exception, match="use spark.readStream"):
        spark.read.format("tablestore").options(**connection).option("table", "stream_src") \
            .option("tunnel", "feed").load().collect()
