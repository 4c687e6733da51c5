"""End-to-end DAG of the provider tests: create table -> create tunnel -> wait for the consume point.

Run by tests/airflow/test_airflow_cli.py with ``airflow dags test`` against an emulator. ``dag_run.conf``
may set ``table``, ``tunnel`` and ``cutoff`` (ISO-8601); without ``cutoff`` the sensor uses the run's
data interval end, or ``run_after`` for manual runs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tablestore.operators.table import TablestoreCreateTableOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

TABLE = "{{ dag_run.conf.get('table', 'airflow_e2e') }}"
TUNNEL = "{{ dag_run.conf.get('tunnel', 'airflow_e2e_tunnel') }}"

with DAG(
    dag_id="tablestore_provider_e2e",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["tablestore", "test"],
) as dag:
    create_table = TablestoreCreateTableOperator(
        task_id="create_table",
        table_name=TABLE,
        primary_key=[("id", "STRING"), ("seq", "INTEGER")],
        stream={"enabled": True, "expiration_hours": 168},
    )
    create_tunnel = TablestoreCreateTunnelOperator(
        task_id="create_tunnel",
        table_name=TABLE,
        tunnel_name=TUNNEL,
        tunnel_type="Stream",
    )
    wait_consumed = TablestoreTunnelConsumePointSensor(
        task_id="wait_consumed",
        table_name=TABLE,
        tunnel_name=TUNNEL,
        cutoff="{{ dag_run.conf.get('cutoff', '') }}",
        deferrable=True,
        poke_interval=1,
        max_wait_seconds=240,
        timeout=timedelta(minutes=5),
    )
    create_table >> create_tunnel >> wait_consumed
