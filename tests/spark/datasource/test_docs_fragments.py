"""docs/spark.md's data source fragments, run as written in one local Spark session against the emulator: the
read (credentials from the ``TABLESTORE_*`` variables, as its comment says), the pushdown setting, the write of
that DataFrame, and the streaming example (its ``/data/...`` paths moved under the test's directory).

The session runs in a process of its own: Spark's Python workers (where the format's planner reads the
variables) inherit the environment of the JVM, which a process starts once, with its first session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs_blocks import block

from airflow_tablestore.client import (
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableClient,
    TableSchema,
    TunnelClient,
)
from airflow_tablestore.emulator.testing import EmulatorProcess

pytestmark = pytest.mark.slow
PAGE = "docs/spark.md"
ROOT = Path(__file__).resolve().parents[3]
FRAGMENTS = ('df = (spark.read.format("tablestore")',
             'spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")',
             '(df.write.format("tablestore")',
             'changes = (spark.readStream.format("tablestore")')

JOB = '''
import json, sys
from pyspark.sql import SparkSession
from airflow_tablestore.spark.format import TablestoreDataSource

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(TablestoreDataSource)  # an editable install: docs/spark.md's one line
namespace = {"spark": spark}
for fragment in json.loads(sys.argv[1]):
    exec(fragment, namespace)
print("CHANGES", spark.read.parquet(sys.argv[2]).count())
spark.stop()
'''


def test_the_data_source_fragments_run_as_written(client: TableClient, tablestore_emulator: EmulatorProcess,
                                                  tmp_path: Path) -> None:
    key = (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)
    columns = (DefinedColumn("amount", ColumnType.DOUBLE),)
    client.create_table(TableSchema("orders", key, columns, stream=StreamSpec(True)))
    client.create_table(TableSchema("orders_copy", key, columns))
    for i in range(20):
        client.put_row("orders", [("id", i)], {"amount": i / 2})
    TunnelClient(transport=client.transport).create_tunnel("orders", "orders_feed")
    fragments = [block(PAGE, first).replace("/data/", f"{tmp_path}/") for first in FRAGMENTS]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
               TABLESTORE_ENDPOINT=tablestore_emulator.endpoint, TABLESTORE_INSTANCE=tablestore_emulator.instance,
               TABLESTORE_ACCESS_KEY_ID=tablestore_emulator.access_key_id,
               TABLESTORE_ACCESS_KEY_SECRET=tablestore_emulator.access_key_secret)
    done = subprocess.run([sys.executable, "-c", JOB, json.dumps(fragments), str(tmp_path / "orders_changes")],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    copied = sorted((r.primary_key[0][1], r.get("amount")) for r in client.iter_range(
        "orders_copy", [("id", 0)], [("id", 10**6)]))
    assert copied == [(i, i / 2) for i in range(20)]  # read, then written by the write fragment
    assert "CHANGES 20" in done.stdout.splitlines(), done.stdout  # the streaming fragment: the base data, once
