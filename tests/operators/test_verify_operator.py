"""``TablestoreVerifyReplicaOperator`` against the emulator: its XCom when the replica is equal, the report when
it is not, and both through ``dag.test()`` (a different replica fails the task after one try, not three)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow_helpers import unique

from airflow_tablestore.client.model import (
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    TableOptions,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.replica import FENCE_COLUMN, TOMBSTONE_SUFFIX
from airflow_tablestore.operators.verify import ReplicaDiffersError, TablestoreVerifyReplicaOperator

TS = 1_700_000_000_000


def _tables(client: Any, rows: int = 4) -> tuple[str, str]:
    """A source and its fenced replica holding the same rows, and a tombstone of a deleted row."""
    names = unique("verify_src"), unique("verify_dst")
    for name in names:
        client.create_table(TableSchema(name=name, primary_key=(PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                        options=TableOptions(max_versions=2, max_time_deviation=2**31 - 1)))
    src, dst = names
    for i in range(rows):
        cells = (Column("v", f"value-{i}", TS + i), Column("v", f"older-{i}", TS + i - 1))
        client.write_rows([RowWrite(src, WriteType.PUT, (("id", i),), cells),
                           RowWrite(dst, WriteType.PUT, (("id", i),), (*cells, Column(FENCE_COLUMN, "0", TS)))])
    client.put_row(dst, [("id", 100)], [Column(FENCE_COLUMN, "00000001" + TOMBSTONE_SUFFIX, TS)])
    return src, dst


def test_equal_replica_returns_the_counts(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    src, dst = _tables(tablestore_client)
    task = TablestoreVerifyReplicaOperator(task_id="verify", source_table=src, destination_table=dst)
    result = task.execute({})
    assert result["ok"] is True
    assert (result["rows_compared"], result["equal"], result["missing"], result["extra"], result["differing"],
            result["tombstones"], result["versions"]) == (4, 4, 0, 0, 0, 1, "all")


def test_different_replica_fails_with_the_report(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    src, dst = _tables(tablestore_client)
    tablestore_client.write_rows([RowWrite(dst, WriteType.UPDATE, (("id", 2),), (Column("v", "older-x", TS + 1),))])
    task = TablestoreVerifyReplicaOperator(task_id="verify", source_table=src, destination_table=dst,
                                           all_versions=False)
    assert task.execute({})["ok"] is True  # the newest versions agree
    task = TablestoreVerifyReplicaOperator(task_id="verify", source_table=src, destination_table=dst)
    with pytest.raises(ReplicaDiffersError) as failed:
        task.execute({})
    first, *rest = str(failed.value).splitlines()
    assert first.startswith(f"replica {dst!r} of {src!r} is DIFFERENT (all versions): 4 rows compared, 3 equal")
    assert rest == ["  differs: (id=2) in column(s) v"]


def test_dag_test_runs_and_fails_the_task_at_once(tablestore_airflow_conn: str, tablestore_client: Any,
                                                  airflow_db: None) -> None:
    from airflow.sdk import DAG

    src, dst = _tables(tablestore_client)
    with DAG(unique("verify_dag"), schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC),
             default_args={"retries": 2, "retry_delay": timedelta(seconds=0)}) as dag:
        TablestoreVerifyReplicaOperator(task_id="verify", source_table=src, destination_table=dst)
    run = dag.test()
    [ti] = run.get_task_instances()
    assert (run.state, ti.state) == ("success", "success")
    assert ti.xcom_pull(task_ids="verify")["equal"] == 4

    tablestore_client.delete_row(dst, [("id", 3)])
    run = dag.test()
    [ti] = run.get_task_instances()
    assert (run.state, ti.state, ti.try_number) == ("failed", "failed", 1)  # no retry: the same answer again
