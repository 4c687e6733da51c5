"""The ``tablestore_spark_job`` example DAG under ``airflow dags test``: a user's PySpark job reads a table with
``format("tablestore")``, aggregates it and writes the result into another table (spark-submit local[2])."""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from demo import replication as demo
from testing.jvm import FAST_JVM

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ROWS = 3000


def test_user_job_reads_aggregates_and_writes_tables(tablestore_emulator: EmulatorProcess,
                                                     tablestore_client: TableClient, tmp_path: Path) -> None:
    source, result = "orders_job_src", "orders_job_totals"
    tablestore_client.create_table(TableSchema(
        name=source,
        primary_key=(PrimaryKeyColumn("shop", PrimaryKeyType.STRING), PrimaryKeyColumn("id", PrimaryKeyType.INTEGER)),
        defined_columns=(DefinedColumn("amount", ColumnType.DOUBLE),),
    ))
    expected: dict[str, list[float]] = defaultdict(list)
    writes = []
    for i in range(ROWS):
        shop, amount = f"shop-{i % 13}", float(i % 97) + 0.25
        expected[shop].append(amount)
        writes.append(RowWrite(source, WriteType.PUT, (("shop", shop), ("id", i)), {"amount": amount}))
    assert tablestore_client.write_rows(writes) == ROWS

    env = demo.airflow_env(tmp_path / "airflow-home", tablestore_emulator, spark_master="local[2]")
    env["_JAVA_OPTIONS"] = FAST_JVM
    # The dev venv installs the package editable, which PySpark's lookup of pyspark_* modules cannot see; a
    # regular install puts pyspark_tablestore.py in site-packages, as this path does here.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    demo.run_cmd("airflow db migrate", [sys.executable, "-m", "airflow", "db", "migrate"], env, 300)
    output = demo.run_cmd(
        "airflow dags test tablestore_spark_job",
        [sys.executable, "-m", "airflow", "dags", "test", "tablestore_spark_job",
         "--conf", json.dumps({"source_table": source, "result_table": result})],
        env, 900, tmp_path / "dag.log",
    )
    summary, _ = json.JSONDecoder().raw_decode(output.split("JOB_SUMMARY ", 1)[1])  # the log adds a suffix
    assert summary["shops"] == len(expected)

    rows = {dict(row.primary_key)["shop"]: {c.name: c.value for c in row.columns}
            for row in tablestore_client.iter_range(result, [("shop", INF_MIN)], [("shop", INF_MAX)])}
    assert rows.keys() == expected.keys()
    for shop, amounts in expected.items():
        assert rows[shop]["orders"] == len(amounts)
        assert rows[shop]["total"] == pytest.approx(sum(amounts))
    assert tablestore_emulator.access_key_secret not in output  # the secret stays in the credentials file
