"""The example DAG's structure, params and secret handling (fast: no Spark, no DAG run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "super-secret-xyz-123"
STS = "sts-token-abcdef-456"


@pytest.fixture(scope="module")
def dag_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    mp = pytest.MonkeyPatch()
    mp.setenv("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow-home")))
    mp.setenv("AIRFLOW_CONN_TS_TEST", json.dumps({
        "conn_type": "tablestore", "host": "http://127.0.0.1:9", "login": "akid-12345", "password": SECRET,
        "extra": {"instance_name": "inst", "sts_token": STS},
    }))
    path = ROOT / "dags/tablestore_replication.py"
    spec = importlib.util.spec_from_file_location("tablestore_replication", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["tablestore_replication"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("tablestore_replication", None)
    mp.undo()


def test_schedule_and_runs(dag_module: ModuleType) -> None:
    dag = dag_module.dag
    # unpausing starts from now (no weeks of no-op runs); catch-up is opt-in (TABLESTORE_REPLICATION_CATCHUP)
    assert dag.catchup is False and dag.max_active_runs == 1
    assert {"tablestore_conn_id", "sink_tablestore_conn_id", "spark_conn_id", "source_table",
            "destination_table", "tunnel_name", "sink_type", "parquet_path"} <= set(dag.params.keys())


def test_every_param_has_a_title_and_a_description(dag_module: ModuleType) -> None:
    for name in dag_module.dag.params:
        param = dag_module.dag.params.get_param(name)
        assert param.schema.get("title") and param.description, name


def test_task_graph(dag_module: ModuleType) -> None:
    dag = dag_module.dag
    down = {t.task_id: set(t.downstream_task_ids) for t in dag.tasks}
    assert down["choose_sink"] == {"create_destination_table", "create_tunnel"}
    assert down["create_destination_table"] == {"create_tunnel"}
    assert down["create_tunnel"] == {"plan"}
    assert down["plan"] == {"full_phase", "incremental_phase", "wait_consume_point", "rebuild_prepare"}
    assert down["full_phase"] == {"incremental_phase"}
    assert down["incremental_phase"] == {"wait_consume_point", "rebuild_prepare"}
    # a rerun of a past interval rebuilds its change-log partitions through a bounded tunnel of its own
    # (rebuild_swap also reads rebuild_prepare's XCom: the bounded tunnel and the staging log)
    assert down["rebuild_prepare"] == {"rebuild_interval", "rebuild_swap"}
    assert down["rebuild_interval"] == {"rebuild_swap"}
    assert down["rebuild_swap"] == {"wait_consume_point"}
    assert down["wait_consume_point"] == {"announce", "verification_wanted"}
    # opt-in verification before the Asset event; skipping it leaves announce to its own trigger rule
    assert down["verification_wanted"] == {"verify_replica"} and down["verify_replica"] == {"announce"}
    assert dag.get_task("verification_wanted").ignore_downstream_trigger_rules is False
    assert dag.params["verify_replica"] is False
    wanted = dag.get_task("verification_wanted").python_callable
    assert [wanted({"verify_replica": on, "sink_type": sink}) for on, sink in (
        (True, "tablestore"), (False, "tablestore"), (True, "parquet"))] == [True, False, False]
    assert [o.name for o in dag.get_task("announce").outlets] == ["tablestore_replication"]  # the AssetAlias
    inc = dag.get_task("incremental_phase")
    assert inc.trigger_rule == "none_failed_min_one_success"
    assert "data_interval_end" in " ".join(inc.application_args)
    assert dag.get_task("wait_consume_point").cutoff == inc.application_args[-1]
    assert inc.application_args[inc.application_args.index("--partition-by") + 1] == "hour"  # as the schedule
    # Spark's start-up INFO noise is kept out of the task log (the packaged log4j2 file sets WARN)
    java_options = inc.conf["spark.driver.extraJavaOptions"]
    assert java_options.startswith("-Dlog4j2.configurationFile=file://")
    assert "rootLogger.level = warn" in Path(java_options.split("file://", 1)[1]).read_text()
    # at most one consumer per DAG at a time, also when a backfill starts several runs at once
    assert all(dag.get_task(t).max_active_tis_per_dag == 1 for t in ("full_phase", "incremental_phase"))


MASTERS = [
    ("local", {"conn_type": "spark", "host": "local[2]"}),
    ("standalone-client", {"conn_type": "spark", "host": "spark://spark-master", "port": 7077,
                           "extra": {"deploy-mode": "client"}}),
    ("yarn-cluster", {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    ("kubernetes-cluster", {"conn_type": "spark", "host": "k8s://https://kube:6443",
                            "extra": {"deploy-mode": "cluster", "namespace": "spark"}}),
]


@pytest.mark.parametrize(("label", "spark_conn"), MASTERS, ids=[m[0] for m in MASTERS])
def test_no_secret_on_any_spark_submit_command_line(dag_module: ModuleType, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, label: str,
                                                    spark_conn: dict[str, object]) -> None:
    """The spark-submit command the DAG's tasks run, for each kind of master, holds no secret (YARN and
    Kubernetes turn env_vars into --conf arguments, visible in process lists and the Spark UI): credentials
    travel in a file only the worker's user can read."""
    import copy
    import stat

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_UNDER_TEST", json.dumps(spark_conn))
    # the hook insists on the cncf.kubernetes provider, unused to build the command
    if label.startswith("kubernetes"):
        from airflow.providers.apache.spark.hooks import spark_submit

        monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    for task_id in ("full_phase", "incremental_phase"):
        task = copy.deepcopy(dag_module.dag.get_task(task_id))
        task.tablestore_conn_id, task.sink_tablestore_conn_id = "ts_test", "ts_test"
        task._conn_id = "spark_under_test"
        private = tmp_path / task_id
        private.mkdir()
        task._with_credentials(str(private))
        command = task._get_hook()._build_spark_submit_command(task.application)
        rendered = " ".join(command)
        assert SECRET not in rendered and STS not in rendered, rendered
        assert "--credentials-file" in command and "ACCESS_KEY" not in rendered
        credentials = private / "tablestore-credentials.json"
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        assert json.loads(credentials.read_text())["source"]["access_key_secret"] == SECRET
        # cluster mode: the file travels with the job; the driver reads it from its working directory
        if "cluster" in label:
            assert command[command.index("--files") + 1] == str(credentials)
            assert command[command.index("--credentials-file") + 1] == credentials.name
        else:
            assert command[command.index("--credentials-file") + 1] == str(credentials)


def test_spark_tasks_fail_at_once_without_spark_submit(dag_module: ModuleType, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No spark-submit on the worker: one actionable line and no retry (AirflowFailException), before
    Spark."""
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    task = dag_module.dag.get_task("full_phase")
    with pytest.raises(AirflowFailException) as info:
        task.execute({})
    assert "spark-submit is not on this worker's PATH" in str(info.value)


def test_unset_change_log_path_reaches_the_parameter_check_empty(dag_module: ModuleType) -> None:
    """An unset path must not render as "None" (a path the check would accept): the sink branch gets ''."""
    task = dag_module.dag.get_task("choose_sink")
    env = dag_module.dag.get_template_env()
    assert env.from_string(task.parquet_path).render(params={"parquet_path": None}) == ""
    assert env.from_string(task.parquet_path).render(params={"parquet_path": "/data/log"}) == "/data/log"


def test_rebuild_reads_its_own_tunnel_into_a_staging_log(dag_module: ModuleType) -> None:
    dag = dag_module.dag
    args = dag.get_task("rebuild_interval").application_args
    prepared = "xcom_pull(task_ids='rebuild_prepare', dag_id='tablestore_replication', key="
    assert prepared + "'tunnel')" in args[args.index("--tunnel") + 1]
    assert prepared + "'staging')" in args[args.index("--sink-path") + 1]
    assert dag.get_task("rebuild_prepare").multiple_outputs  # so its XCom has the keys "tunnel" and "staging"
    assert args[args.index("--sink") + 1] == "parquet" and "--sink-table" not in args
    assert args[-1] == dag.get_task("incremental_phase").application_args[-1]  # the same cutoff
    swap = dag.get_task("rebuild_swap")
    assert (str(swap.tunnel_name), str(swap.staging_path)) == (args[args.index("--tunnel") + 1],
                                                               args[args.index("--sink-path") + 1])


def test_branches_name_the_dags_tasks(dag_module: ModuleType) -> None:
    """The branch operators name tasks that exist (the DAG passes the task objects' ids, not copies)."""
    dag = dag_module.dag
    plan, choose_sink = dag.get_task("plan"), dag.get_task("choose_sink")
    assert set(plan.task_ids.values()) <= set(plan.downstream_task_ids)
    assert {choose_sink.tablestore_sink_task_id, choose_sink.parquet_sink_task_id} == choose_sink.downstream_task_ids
    assert dag.get_task("rebuild_prepare").plan_task_id == plan.task_id
    assert dag.get_task("announce").phase_task_ids == ["full_phase", "incremental_phase"]


def test_factory_takes_the_parameters_defaults() -> None:
    """``replication_dag(...)``: the same DAG under another id, its parameters' defaults replaced and checked."""
    from airflow.sdk.exceptions import ParamValidationError

    from airflow_tablestore.example_dags.tablestore_replication import dag as packaged
    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    dag = replication_dag("orders_replication", source_table="orders", sink_type="parquet", parquet_path="/data/o")
    assert dag.dag_id == "orders_replication" and dag.schedule == packaged.schedule
    assert (dag.params["source_table"], dag.params["sink_type"], dag.params["parquet_path"]) == (
        "orders", "parquet", "/data/o")
    assert packaged.params["source_table"] == "source_table"  # each DAG has Param objects of its own
    assert {t.task_id: t.downstream_task_ids for t in dag.tasks} == {
        t.task_id: t.downstream_task_ids for t in packaged.tasks}
    args = dag.get_task("rebuild_interval").application_args
    assert "dag_id='orders_replication'" in args[args.index("--tunnel") + 1]  # its own XComs
    with pytest.raises(TypeError, match="source_tabel"):
        replication_dag(source_tabel="orders")
    with pytest.raises(ParamValidationError, match="records_per_channel"):
        replication_dag(records_per_channel=0)


def test_dags_folder_lines_enable_the_packaged_dags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository's ``dags/`` files are the documented lines a user adds; next to a DAG a user builds with
    the factory, the DAG processor (safe mode) finds each DAG once, in the file that binds it."""
    from airflow.dag_processing.dagbag import DagBag

    for name, doc in (("tablestore_replication", "airflow.md"), ("tablestore_spark_job", "spark.md"),
                      ("tablestore_stream_job", "spark.md")):
        line = f"from airflow_tablestore.example_dags.{name} import dag  # noqa: F401"
        assert line in (ROOT / "dags" / f"{name}.py").read_text().splitlines()
        assert line in (ROOT / "docs" / doc).read_text()
        (tmp_path / f"{name}.py").write_text((ROOT / "dags" / f"{name}.py").read_text())
    (tmp_path / "orders.py").write_text(  # it also imports a name from the Spark job DAG's module
        "from airflow_tablestore.example_dags.tablestore_replication import replication_dag\n"
        "from airflow_tablestore.example_dags.tablestore_spark_job import JOB  # noqa: F401\n\n"
        "dag = replication_dag('orders_replication', source_table='orders')\n")
    # The DAG processor parses each file in a process of its own: orders.py, parsed first with fresh imports of the
    # example modules, gets only its own DAG (the packaged ones are not auto-registered in an importing file).
    for module in [name for name in sys.modules if name.startswith("airflow_tablestore.example_dags.")]:
        monkeypatch.delitem(sys.modules, module)
    alone = DagBag(dag_folder=tmp_path / "orders.py", safe_mode=True, bundle_path=tmp_path)
    assert not alone.import_errors and set(alone.dags) == {"orders_replication"}, alone.dags
    bag = DagBag(dag_folder=tmp_path, safe_mode=True, bundle_path=tmp_path)
    assert not bag.import_errors
    expected = {"tablestore_replication": "tablestore_replication.py",
                "tablestore_spark_job": "tablestore_spark_job.py",
                "tablestore_stream_job": "tablestore_stream_job.py", "orders_replication": "orders.py"}
    assert {dag_id: Path(dag.fileloc) for dag_id, dag in bag.dags.items()} == {
        dag_id: tmp_path / name for dag_id, name in expected.items()}
    assert {dag_id: dag.relative_fileloc for dag_id, dag in bag.dags.items()} == expected
    assert bag.dags["orders_replication"].params["source_table"] == "orders"
