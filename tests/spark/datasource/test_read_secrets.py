"""The AccessKey secret and the STS token of a ``tablestore`` read or write never show: not in the plan,
``explain()``, the SQL executions the Spark UI shows, the event log (which the history server shows), errors of
failing reads and writes, or the reader's and options' reprs."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    TableSchema,
)
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.datasource.options import SourceOptions

ROOT = str(Path(__file__).resolve().parents[3])
TABLE = "ds_secret_read"
TOKEN = "sts-secret-token"


def test_the_secret_is_nowhere_spark_shows(tablestore_emulator: EmulatorProcess, settings: ConnectionSettings,
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tablestore_emulator.access_key_secret
    with settings.table_client() as client:
        client.create_table(TableSchema(TABLE, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                        (DefinedColumn("s", ColumnType.STRING),)))
        client.put_row(TABLE, [("id", 1)], [("s", "a")])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is None
    events = tmp_path / "events"
    events.mkdir()
    spark = (SparkSession.builder.master("local[1]").appName("test-tablestore-secrets")
             .config("spark.ui.enabled", "false").config("spark.eventLog.enabled", "true")
             .config("spark.eventLog.dir", str(events)).config("spark.eventLog.compress", "false")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    connection = {"endpoint": tablestore_emulator.endpoint, "instance": tablestore_emulator.instance,
                  "access_key_id": tablestore_emulator.access_key_id, "access_key_secret": secret}
    shown: list[str] = []
    try:
        df: Any = spark.read.format("tablestore").options(**connection).option("table", TABLE).load().where("id = 1")
        assert [tuple(r) for r in df.collect()] == [(1, "a")]
        df.explain(True)
        shown.append(df._jdf.queryExecution().toString())
        with pytest.raises(Exception) as err:
            spark.read.format("tablestore").options(**connection).option("table", "no_such_table").load().collect()
        shown.append(str(err.value))
        assert "OTSObjectNotExist: Requested table does not exist: 'no_such_table'" in shown[-1]  # named
        with pytest.raises(Exception) as bad_option:
            spark.read.format("tablestore").options(**connection).option("table", TABLE).option(
                "max_versions", "zero").load()
        shown.append(str(bad_option.value))
        assert "max_versions" in shown[-1]

        # a write with the secret and an STS token in its options: its plan, the UI's record of it, its errors
        writing = {**connection, "sts_token": TOKEN}
        frame = spark.createDataFrame([(2, "b")], "id long, s string")
        frame.write.format("tablestore").options(**writing).option("table", TABLE).mode("append").save()
        with pytest.raises(Exception) as no_table:  # refused on the driver
            frame.write.format("tablestore").options(**writing).option("table", "no_such_table").mode(
                "append").save()
        shown.append(str(no_table.value))
        assert "does not exist" in shown[-1]
        with pytest.raises(Exception) as failed_rows:  # a task fails: the service refuses NaN
            spark.createDataFrame([(3, float("nan"))], "id long, d double").write.format("tablestore").options(
                **writing).option("table", TABLE).mode("append").save()
        shown.append(str(failed_rows.value))
        assert "1 of 1 row(s) could not be written" in shown[-1]
        executions = spark._jsparkSession.sharedState().statusStore().executionsList()  # the UI's SQL tab
        plans = [executions.apply(i) for i in range(executions.size())]
        shown += [f"{e.description()}\n{e.details()}\n{e.physicalPlanDescription()}" for e in plans]
        assert any("AppendData" in text or "WriteToDataSourceV2" in text for text in shown[-len(plans):])
    finally:
        spark.stop()
    shown.append(capsys.readouterr().out)
    logs = [path.read_text(errors="replace") for path in events.rglob("*") if path.is_file()]
    assert logs and any("SparkListenerSQLExecutionStart" in log for log in logs)
    shown += logs
    assert any("WriteToDataSourceV2" in log or "AppendData" in log for log in logs)  # the writes are logged
    options = SourceOptions.parse({**connection, "table": TABLE, "sts_token": TOKEN})
    shown += [repr(options), repr(options.settings)]
    for text in shown:
        assert secret not in text
        assert TOKEN not in text
    with settings.table_client() as client:  # the first write landed
        assert len(list(client.iter_range(TABLE, [("id", INF_MIN)], [("id", INF_MAX)]))) == 2
