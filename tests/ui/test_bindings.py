"""Which DAG tasks use which tunnel, read from serialized DAGs (the replication DAG and hand-made ones)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization

from airflow_tablestore.example_dags.tablestore_replication import replication_dag
from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator
from airflow_tablestore.ui.metadata import Binding, bindings_of


def serialized(dag: DAG) -> object:
    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def test_the_replication_dag_uses_its_tunnel_through_its_parameter_defaults() -> None:
    dag = replication_dag("orders_replication", source_table="orders", tunnel_name="orders_tunnel",
                          tablestore_conn_id="tablestore_prod", auto_register=False)
    found = bindings_of(serialized(dag))
    assert {(b.conn_id, b.table, b.tunnel) for b in found} == {("tablestore_prod", "orders", "orders_tunnel")}
    consumers = {b.task_id for b in found if b.consumes}
    assert consumers == {"full_phase", "incremental_phase"}  # the Spark consumer's --table/--tunnel arguments
    assert {"create_tunnel", "plan", "wait_consume_point"} <= {b.task_id for b in found}
    # rebuild_swap's tunnel comes from an XCom template: not rendered here, so not a binding
    assert "rebuild_swap" not in {b.task_id for b in found}


def test_literal_fields_and_templates_that_are_not_parameters() -> None:
    with DAG("consumers", schedule=None, start_date=datetime(2026, 1, 1), params={"t": "orders"}) as dag:
        TablestoreTunnelConsumeOperator(task_id="literal", table_name="payments", tunnel_name="sync",
                                        apply_function=print, max_records=1)
        TablestoreTunnelConsumeOperator(task_id="templated", table_name="{{ params.t }}",
                                        tunnel_name="{{ ds }}", apply_function=print, max_records=1)
    assert bindings_of(serialized(dag)) == [
        Binding("tablestore_default", "payments", "sync", "consumers", "literal", True)]
