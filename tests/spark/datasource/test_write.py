"""``df.write.format("tablestore")``: put and update row changes, versions, save modes, the fence, failures.

Arrow-to-writes conversion is tested without Spark; the rest runs a real local Spark against the emulator.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    CellOp,
    Column,
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Row,
    TableOptions,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.datasource.options import OptionError, SourceOptions
from airflow_tablestore.spark.datasource.writer import OVERWRITE_REFUSED, TablestoreWriter, batch_writes, plan_write

KEY = (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)


# ---- without Spark ------------------------------------------------------------------------------


def _options(**extra: str) -> SourceOptions:
    return SourceOptions.parse({"endpoint": "http://127.0.0.1:1", "instance": "i", "access_key_id": "k",
                                "access_key_secret": "not-a-secret", "table": "t", **extra})


def _writer(schema: Any, **extra: str) -> TablestoreWriter:
    from pyspark.sql.types import StructType

    assert isinstance(schema, StructType)
    return TablestoreWriter(_options(**extra), schema, False, describe=lambda _: TableSchema("t", KEY))


def _ddl(text: str) -> Any:
    """A ``StructType`` from "name type, ..." without a JVM (the few types these tests use)."""
    from pyspark.sql import types as t

    simple = {"long": t.LongType(), "int": t.IntegerType(), "string": t.StringType(), "double": t.DoubleType(),
              "boolean": t.BooleanType(), "binary": t.BinaryType(), "decimal(10,2)": t.DecimalType(10, 2),
              "versions": t.ArrayType(t.StructType([
                  t.StructField("timestamp", t.LongType()), t.StructField("value", t.StringType())]))}
    fields = []
    for part in text.split(", "):
        name, kind = part.split(" ", 1)
        fields.append(t.StructField(name, simple[kind]))
    return t.StructType(fields)


def test_put_writes_non_null_columns_column_wise() -> None:
    writer = _writer(_ddl("id long, s string, d double, b boolean, x binary, i int"))
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array([1, 2], pa.int64()), "s": ["é", None], "d": [float("inf"), None], "b": [False, None],
        "x": pa.array([b"", None], pa.binary()), "i": pa.array([-(2**31), None], pa.int32())})
    writes, invalid = batch_writes(writer.plan, batch)
    assert invalid == []
    assert [w.type for w in writes] == [WriteType.PUT, WriteType.PUT]
    assert writes[0].primary_key == (("id", 1),)
    assert writes[0].columns == (Column("s", "é"), Column("d", float("inf")), Column("b", False), Column("x", b""),
                                 Column("i", -(2**31)))
    assert writes[1].columns == ()  # a put of the key alone: the row exists with no columns


def test_update_deletes_null_columns_and_writes_versions() -> None:
    writer = _writer(_ddl("id long, s string, v versions"),
                     row_change="update")
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "s": None, "v": [{"timestamp": 20, "value": "new"}, {"timestamp": 10, "value": "old"}]},
         {"id": 2, "s": "x", "v": None}],
        schema=pa.schema([("id", pa.int64()), ("s", pa.string()),
                          ("v", pa.list_(pa.struct([("timestamp", pa.int64()), ("value", pa.string())])))]))
    writes, _ = batch_writes(writer.plan, batch)
    assert writes[0].type is WriteType.UPDATE
    assert writes[0].columns == (Column("s", None, None, CellOp.DELETE_ALL_VERSIONS), Column("v", "new", 20),
                                 Column("v", "old", 10))
    assert writes[1].columns == (Column("s", "x"), Column("v", None, None, CellOp.DELETE_ALL_VERSIONS))


def test_fence_by_makes_conditional_writes_and_null_keys_are_reported() -> None:
    writer = _writer(_ddl("id long, s string, version long"), fence_by="version")
    batch = pa.RecordBatch.from_pydict({"id": [1, None, 3], "s": ["a", "b", "c"], "version": [5, 6, None]})
    writes, invalid = batch_writes(writer.plan, batch)
    assert len(writes) == 1
    condition = writes[0].condition.column_condition
    assert condition is not None and (condition.column, condition.value) == ("version", 5)
    assert Column("version", 5) in writes[0].columns
    assert [reason for _, reason in invalid] == ["a primary-key column is null",
                                                 "its fence_by column 'version' is null"]


@pytest.mark.parametrize(("ddl", "extra", "message"), [
    ("id long, d decimal(10,2)", {}, "column 'd' is decimal(10,2), which Tablestore cannot store exactly"),
    ("key long, s string", {}, "the DataFrame has no column 'id', a primary-key column of table 't'"),
    ("ID long, s string", {}, "names are case-sensitive"),
    ("id string, s string", {}, "primary-key column 'id' of table 't' is INTEGER; the DataFrame's is string"),
    ("id long", {"row_change": "update"}, "row_change=update needs at least one column besides the primary key"),
    ("id long, s string", {"fence_by": "id"}, "fence_by column 'id' must be a column of the DataFrame"),
    ("id long, b boolean", {"fence_by": "b"}, "fence_by column 'b' is boolean"),
])
def test_a_schema_the_table_cannot_take_is_refused_on_the_driver(ddl: str, extra: dict[str, str],
                                                                  message: str) -> None:
    with pytest.raises(OptionError, match=None) as info:
        plan_write(_ddl(ddl), _options(**extra), KEY)
    assert message in str(info.value)


def test_a_fence_by_column_stored_with_another_type_is_refused_on_the_driver() -> None:
    stored = TableSchema("t", KEY, (DefinedColumn("version", ColumnType.STRING),))
    with pytest.raises(OptionError) as info:
        TablestoreWriter(_options(fence_by="version"), _ddl("id long, s string, version long"), False,
                         describe=lambda _: stored)
    text = str(info.value)
    assert "\n" not in text
    assert ("fence_by column 'version' is bigint (Tablestore INTEGER) in the DataFrame but a STRING defined column "
            "of table 't'") in text and "every write would be refused" in text
    same = TablestoreWriter(_options(fence_by="version"), _ddl("id long, s string, version string"), False,
                            describe=lambda _: stored)
    assert same.plan.fence_by == "version"
    # an int is written as INTEGER too; a column the table does not define cannot be checked up front
    assert TablestoreWriter(_options(fence_by="version"), _ddl("id long, version int"), False,
                            describe=lambda _: TableSchema("t", KEY, (DefinedColumn("version", ColumnType.INTEGER),))
                            ).plan.fence_by == "version"
    assert _writer(_ddl("id long, version long"), fence_by="version").plan.fence_by == "version"


def test_overwrite_is_refused_with_one_line() -> None:
    with pytest.raises(OptionError) as info:
        TablestoreWriter(_options(), _ddl("id long"), True, describe=lambda _: TableSchema("t", KEY))
    assert str(info.value).endswith(OVERWRITE_REFUSED) and "\n" not in str(info.value)


def test_the_writer_pickles_without_the_secret() -> None:
    import pickle

    writer = _writer(_ddl("id long, s string"))
    assert "not-a-secret" not in repr(writer)
    assert pickle.loads(pickle.dumps(writer)).plan == writer.plan


# ---- with Spark and the emulator ----------------------------------------------------------------


def _table(client: TableClient, name: str, max_versions: int = 1,
           key: tuple[PrimaryKeyColumn, ...] = KEY) -> str:
    client.create_table(TableSchema(name, key, options=TableOptions(max_versions=max_versions)))
    return name


def _rows(client: TableClient, table: str, max_versions: int = 1) -> list[Row]:
    names = [c.name for c in client.describe_table(table).schema.primary_key]
    return list(client.iter_range(table, [(n, INF_MIN) for n in names], [(n, INF_MAX) for n in names],
                                  max_versions=max_versions))


def _values(rows: list[Row]) -> dict[Any, dict[str, Any]]:
    return {row.primary_key[0][1]: {c.name: c.value for c in row.columns} for row in rows}


def _write(spark: Any, emulator: EmulatorProcess, frame: Any, table: str, mode: str = "append",
           **options: str) -> None:
    connection = {"endpoint": emulator.endpoint, "instance": emulator.instance,
                  "access_key_id": emulator.access_key_id, "access_key_secret": emulator.access_key_secret}
    frame.write.format("tablestore").options(**connection, table=table, **options).mode(mode).save()


class _RecordingProxy:
    """An HTTP proxy in front of the emulator that records the rows of every BatchWriteRow request the Spark
    workers send, byte for byte (requests are signed over the API path and ``x-ots-*`` headers, not the host)."""

    def __init__(self, target: str) -> None:
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlparse

        from airflow_tablestore.protocol import ots_table_pb2

        self.batches: list[int] = []
        lock = threading.Lock()
        host, port = urlparse(target).hostname, urlparse(target).port
        recorded = self.batches

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/BatchWriteRow"):
                    request: Any = ots_table_pb2.BatchWriteRowRequest.FromString(body)  # type: ignore[attr-defined]
                    with lock:
                        recorded.append(sum(len(t.rows) for t in request.tables))
                upstream = http.client.HTTPConnection(host or "127.0.0.1", port, timeout=120)
                try:
                    upstream.request("POST", self.path, body, {
                        k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")})
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                self.send_response_only(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_append_puts_rows_in_legal_batches(spark: Any, tablestore_emulator: EmulatorProcess,
                                           client: TableClient) -> None:
    table = _table(client, "write_put")
    frame = spark.range(0, 1234, 1, numPartitions=3).selectExpr(
        "id", "cast(id as string) as s", "cast(id / 2 as double) as d", "id % 2 = 0 as b",
        "cast(if(id % 3 = 0, null, id) as int) as maybe")
    proxy = _RecordingProxy(tablestore_emulator.endpoint)
    try:
        connection = {"endpoint": proxy.endpoint, "instance": tablestore_emulator.instance,
                      "access_key_id": tablestore_emulator.access_key_id,
                      "access_key_secret": tablestore_emulator.access_key_secret}
        frame.write.format("tablestore").options(**connection, table=table, batch_rows="7").mode("append").save()
    finally:
        proxy.close()
    # each of the 3 tasks (411, 411 and 412 rows, one Arrow batch each) sends ceil(rows / 7) requests of <= 7 rows
    assert sorted(frame.rdd.glom().map(len).collect()) == [411, 411, 412]
    assert max(proxy.batches) == 7 and sum(proxy.batches) == 1234
    assert len(proxy.batches) == 3 * 59 == math.ceil(1234 / 7)
    assert sorted(proxy.batches)[:3] == [5, 5, 6]  # every other request is full
    got = _values(_rows(client, table))
    assert len(got) == 1234
    assert got[9] == {"s": "9", "d": 4.5, "b": False}  # a null column is absent
    assert got[10] == {"s": "10", "d": 5.0, "b": True, "maybe": 10}
    _write(spark, tablestore_emulator, spark.createDataFrame([(9, "nine")], "id long, s string"), table)
    assert _values(_rows(client, table))[9] == {"s": "nine"}  # put replaces the row


def test_update_sets_columns_deletes_nulls_and_keeps_the_others(spark: Any, tablestore_emulator: EmulatorProcess,
                                                               client: TableClient) -> None:
    table = _table(client, "write_update")
    _write(spark, tablestore_emulator, spark.createDataFrame([(1, "a", "b", "c")], "id long, x string, y string, "
                                                             "z string"), table)
    _write(spark, tablestore_emulator, spark.createDataFrame([(1, "A", None)], "id long, x string, y string"), table,
           row_change="update")
    assert _values(_rows(client, table)) == {1: {"x": "A", "z": "c"}}


def test_versions_are_written_with_their_timestamps(spark: Any, tablestore_emulator: EmulatorProcess,
                                                   client: TableClient) -> None:
    table = _table(client, "write_versions", max_versions=5)
    now = int(time.time() * 1000)
    frame = spark.createDataFrame([(1, [(now, "c"), (now - 1, "b"), (now - 5000, "a")])],
                                  "id long, v array<struct<timestamp: long, value: string>>")
    _write(spark, tablestore_emulator, frame, table)
    (row,) = _rows(client, table, max_versions=5)
    assert [(c.name, c.value, c.timestamp) for c in row.columns] == [("v", "c", now), ("v", "b", now - 1),
                                                                      ("v", "a", now - 5000)]


def test_save_modes_other_than_append_are_refused_with_one_line(spark: Any, tablestore_emulator: EmulatorProcess,
                                                                client: TableClient) -> None:
    table = _table(client, "write_modes")
    frame = spark.createDataFrame([(1, "a")], "id long, s string")
    for mode, expected in [("overwrite", OVERWRITE_REFUSED), ("errorifexists", "ErrorIfExists"),
                           ("ignore", "Ignore")]:
        with pytest.raises(Exception) as info:
            _write(spark, tablestore_emulator, frame, table, mode=mode)
        assert expected in str(info.value)
    assert _rows(client, table) == []


def test_fence_by_never_rolls_a_row_back(spark: Any, tablestore_emulator: EmulatorProcess,
                                         client: TableClient) -> None:
    table = _table(client, "write_fence")
    schema = "id long, s string, version long"
    _write(spark, tablestore_emulator, spark.createDataFrame([(1, "new", 5), (2, "new", 5)], schema), table,
           fence_by="version")
    # an older DataFrame (and a re-sent one, as a retried task does) is refused row by row; a newer row lands
    _write(spark, tablestore_emulator, spark.createDataFrame([(1, "old", 4), (2, "same", 5), (3, "first", 1)],
                                                             schema), table, fence_by="version")
    assert _values(_rows(client, table)) == {1: {"s": "new", "version": 5}, 2: {"s": "new", "version": 5},
                                             3: {"s": "first", "version": 1}}
    _write(spark, tablestore_emulator, spark.createDataFrame([(1, None, 6)], schema), table, fence_by="version",
           row_change="update")
    assert _values(_rows(client, table))[1] == {"version": 6}


def test_rows_that_fail_for_good_fail_the_job_with_a_count_and_an_example(
        spark: Any, tablestore_emulator: EmulatorProcess, client: TableClient) -> None:
    table = _table(client, "write_fail", key=(PrimaryKeyColumn("k", PrimaryKeyType.STRING),))
    frame = spark.createDataFrame([("ok", "a"), ("x" * 2000, "b"), ("y" * 2000, "c"), (None, "d")],
                                  "k string, s string").coalesce(1)
    with pytest.raises(Exception) as info:
        _write(spark, tablestore_emulator, frame, table)
    text = str(info.value)
    # rows the service refused (a key too long, a null key) fail at once: no retry, and the message does not claim one
    assert "3 of 4 row(s) could not be written to table 'write_fail'; e.g. the row (k=" in text
    assert [r.primary_key for r in _rows(client, table)] == [(("k", "ok"),)]  # the good row is written


FENCED_JOB = """
import os, sys
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
frame = spark.createDataFrame([(1, "a", 5), (2, "b", 5)], "id long, s string, version long")
for _ in range(2):  # the second write is refused by the fence row by row
    frame.write.format("tablestore").options(**CONNECTION, table=TABLE, fence_by="version").mode("append").save()
spark.stop()
"""


def test_the_fence_count_reaches_the_driver_log(tablestore_emulator: EmulatorProcess, client: TableClient,
                                                tmp_path: Any) -> None:
    """The count of writes the fence refused is logged where the driver's output is (a job run as
    ``python job.py`` or by spark-submit, whose output is the Airflow task's log), not in a worker's log."""
    import os
    import subprocess
    import sys

    table = _table(client, "write_fence_log")
    connection = {"endpoint": tablestore_emulator.endpoint, "instance": tablestore_emulator.instance,
                  "access_key_id": tablestore_emulator.access_key_id,
                  "access_key_secret": tablestore_emulator.access_key_secret}
    job = tmp_path / "job.py"
    job.write_text(f"CONNECTION = {connection!r}\nTABLE = {table!r}\n" + FENCED_JOB)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, str(job)], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "INFO tablestore: wrote" in line]
    assert [line.split("INFO tablestore: ", 1)[1] for line in lines] == [
        f"wrote 2 row(s) to table {table!r} in 1 task(s), {refused} refused by the fence (the table held them or "
        "newer)" for refused in (0, 2)]
