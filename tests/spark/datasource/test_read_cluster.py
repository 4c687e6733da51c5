"""``spark.read.format("tablestore")`` on a standalone cluster (a master and two workers, issue 19 item 3): a table
split into at least 8 partitions is read exactly, every row once, by executors on both workers; the job has no
registration line and takes its credentials from the ``TABLESTORE_*`` environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e.spark_runs import BIN, consumer_env
from e2e.test_standalone_cluster import Daemon, cluster  # noqa: F401 (the fixture)

from airflow_tablestore.client.model import Column, PrimaryKeyColumn, PrimaryKeyType, RowWrite, TableSchema, WriteType
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.jvm import FAST_JVM

pytestmark = pytest.mark.slow
ROOT = str(Path(__file__).resolve().parents[3])
TABLE = "ds_read_cluster"
ROWS = 3000
JOB = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("tablestore-read-cluster").getOrCreate()
df = spark.read.format("tablestore").option("table", sys.argv[1]).option("split_size_mb", "1").load()
ids = [row.id for row in df.select("id").collect()]
print(f"PARTITIONS={df.rdd.getNumPartitions()} ROWS={len(ids)} DISTINCT={len(set(ids))} "
      f"EXACT={sorted(ids) == list(range(int(sys.argv[2])))}")
spark.stop()
"""


def test_a_split_table_reads_exactly_on_two_workers(cluster: tuple[str, list[Daemon]],  # noqa: F811
                                                    tablestore_emulator: EmulatorProcess,
                                                    settings: ConnectionSettings, tmp_path: Path) -> None:
    url, workers = cluster
    with settings.table_client() as client:
        client.create_table(TableSchema(TABLE, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
        client.write_rows([RowWrite(TABLE, WriteType.PUT, (("id", i),), (Column("blob", "p" * 4000),))
                           for i in range(ROWS)])
    job = tmp_path / "read_job.py"
    job.write_text(JOB)
    env: dict[str, Any] = consumer_env(tablestore_emulator)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)  # pyspark_tablestore
    cmd = [str(BIN / "spark-submit"), "--master", url, "--deploy-mode", "client",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.executor.memory=512m", "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
           "--driver-java-options", FAST_JVM, str(job), TABLE, str(ROWS)]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("PARTITIONS="))
    fields = dict(part.split("=") for part in line.split())
    assert int(fields["PARTITIONS"]) >= 8, line
    assert fields["ROWS"] == fields["DISTINCT"] == str(ROWS) and fields["EXACT"] == "True", line
    for worker in workers:
        assert any("Asked to launch executor" in text for text in worker.lines), "".join(worker.lines[-30:])
    assert settings.access_key_secret not in output
