"""``TablestoreSparkSubmitOperator`` on its own (no Spark, no DAG): how a consumer's exit fails the task."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_helpers import unique

from airflow_tablestore.operators.spark_submit import (
    CONSUMER_APPLICATION,
    TablestoreSparkSubmitOperator,
    consumer_arguments,
    without_unset_options,
)
from airflow_tablestore.spark.consumer.job import EXIT_BAD_ARGUMENTS, EXIT_PERMANENT, EXIT_RETRYABLE


@pytest.mark.parametrize(("exit_code", "permanent"), [(EXIT_RETRYABLE, False), (EXIT_BAD_ARGUMENTS, True),
                                                      (EXIT_PERMANENT, True)])
def test_a_permanent_consumer_exit_fails_the_task_at_once(exit_code: int, permanent: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit codes 2 and 3 become ``AirflowFailException`` (no retries: they cannot help); exit code 1 is raised as
    spark-submit reported it, so Airflow retries the task."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    import airflow_tablestore.spark.consumer.preflight as preflight

    monkeypatch.setenv("AIRFLOW_CONN_TS_SPARK_TEST", json.dumps({
        "conn_type": "tablestore", "host": "http://127.0.0.1:9", "login": "akid", "password": "secret",
        "extra": {"instance_name": "inst"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setattr(preflight, "spark_submit_problem", lambda binary="spark-submit", path=None: None)
    reported = RuntimeError(f"Cannot execute: spark-submit ... tablestore_consumer.py. Error code is: {exit_code}.")
    submitted: list[list[str]] = []

    def spark_submit(self: TablestoreSparkSubmitOperator, context: object) -> None:
        submitted.append(list(self.application_args))
        raise reported

    monkeypatch.setattr(SparkSubmitOperator, "execute", spark_submit)
    task = TablestoreSparkSubmitOperator(
        task_id=unique("incremental_phase"), application=CONSUMER_APPLICATION,
        tablestore_conn_id="ts_spark_test", sink_tablestore_conn_id="ts_spark_test",
        application_args=consumer_arguments(table="src", tunnel="t", phase="incremental", sink="parquet",
                                            sink_path="/log", cutoff="2026-11-26T00:00:00Z"))
    with pytest.raises(AirflowFailException if permanent else RuntimeError) as info:
        task.execute({})
    [args] = submitted  # spark-submit ran once, with the credentials file (not the secret) on its command line
    assert "--credentials-file" in args and "secret" not in " ".join(args)
    if permanent:
        assert f"exit code {exit_code}" in str(info.value) and "not retried" in str(info.value)
        assert info.value.__cause__ is reported
    else:
        assert info.value is reported


@pytest.mark.parametrize(("args", "expected"), [
    (["--table", "t", "--sink-path", "None", "--sink-table", "r"], ["--table", "t", "--sink-table", "r"]),
    (["--sink-path", "", "--cutoff", "2026-11-26T00:00:00Z"], ["--cutoff", "2026-11-26T00:00:00Z"]),
    (["--table", "t"], ["--table", "t"]),
    ([], []),
])
def test_unset_rendered_options_never_reach_the_command_line(args: list[str], expected: list[str]) -> None:
    assert without_unset_options(args) == expected


@pytest.mark.parametrize(("sink_args", "outputs"), [
    (["--sink", "tablestore", "--sink-table", "orders_replica", "--sink-path", "None"],
     [("tablestore://emulator", "orders_replica")]),
    (["--sink", "parquet", "--sink-path", "/data/changes"], [("file", "/data/changes")]),
    (["--sink", "parquet", "--sink-path", "s3://lake/orders/changes"], [("s3://lake", "orders/changes")]),
])
def test_openlineage_names_the_source_table_and_the_sink(tablestore_airflow_conn: str,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         sink_args: list[str], outputs: list[tuple[str, str]]) -> None:
    """Stand-ins for the OpenLineage classes (optional dependency) record what the operator builds."""
    import sys
    from types import ModuleType, SimpleNamespace

    facet, extractors = ModuleType("facet"), ModuleType("extractors")
    facet.Dataset = lambda namespace, name: (namespace, name)  # type: ignore[attr-defined]
    extractors.OperatorLineage = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "airflow.providers.common.compat.openlineage.facet", facet)
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.extractors", extractors)
    operator = TablestoreSparkSubmitOperator(
        task_id=unique("consume"), application="app.py", tablestore_conn_id=tablestore_airflow_conn,
        sink_tablestore_conn_id=tablestore_airflow_conn,
        application_args=["--table", "orders", "--tunnel", "t", "--phase", "full", *sink_args])
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == [("tablestore://emulator", "orders")]
    assert lineage.outputs == outputs
