"""Every code block of README.md and docs/*.md is run by a test, or listed here with why it cannot be.

Where each kind of block is run:

- shell blocks (``bash``): tests/test_docs_commands.py, every command by a rule;
- every block of docs/first-hour.md: tests/compat/test_journeys.py (each is a journey step; its ``text`` blocks
  are the outputs the steps must print);
- ``RUN_BY``: the named test reads the block out of the page (by the text given) and runs it;
- ``RUN_HERE``: this module runs it as written against the emulator. The pages' placeholders for a connection
  (``endpoint``, ``access_key_id``, ... and the ``myinst`` endpoint) are the emulator's; other names a block
  takes from the text around it are bound as ``NAMESPACE`` says;
- ``NOT_RUN``: the exceptions, each with its reason (keep it short).

A block in none of these fails ``test_every_block_is_accounted_for``; ``text`` and unlabelled blocks (diagrams,
outputs) are not code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow_helpers import run_user_pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_CODE = ("", "text")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            found.append(Block(page.relative_to(REPO).as_posix(), text[:match.start()].count("\n") + 1,
                               match.group(1), match.group(2)))
    return found


def block(page: str, first_line: str) -> str:
    """The one block of ``page`` that starts with ``first_line``."""
    (found,) = [b.text for b in blocks() if b.page == page and b.first_line == first_line]
    return found


# (page, first line) -> the test module that runs it and the text by which it finds the block
RUN_BY: dict[tuple[str, str], tuple[str, str]] = {
    ("docs/airflow.md", "from airflow.sdk import Asset, AssetWatcher, dag, task"):
        ("tests/e2e/test_asset_watcher.py", "TablestoreTunnelChangesTrigger("),
    ("docs/airflow.md", "from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator"):
        ("tests/test_docs_examples.py", "from airflow_tablestore.operators.consume import"),
    ("docs/airflow.md", "from airflow_tablestore.sensors.row import TablestoreRowSensor"):
        ("tests/test_docs_examples.py", "from airflow_tablestore.sensors.row import TablestoreRowSensor"),
    ("docs/emulator.md", "# test_my_dag.py"): ("tests/test_plugin_dag_test.py", "# test_my_dag"),
    # the data source fragments, in one Spark session
    ("docs/spark.md", 'df = (spark.read.format("tablestore")'):
        ("tests/spark/datasource/test_docs_fragments.py", 'df = (spark.read.format("tablestore")'),
    ("docs/spark.md", 'spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")'):
        ("tests/spark/datasource/test_docs_fragments.py", 'spark.conf.set("spark.sql.python.filterPushdown'),
    ("docs/spark.md", '(df.write.format("tablestore")'):
        ("tests/spark/datasource/test_docs_fragments.py", '(df.write.format("tablestore")'),
    ("docs/spark.md", 'changes = (spark.readStream.format("tablestore")'):
        ("tests/spark/datasource/test_docs_fragments.py", 'changes = (spark.readStream.format("tablestore")'),
    # the one-line enabling of each packaged DAG: parsed as the DAG processor parses a dags folder
    ("docs/airflow.md", "from airflow_tablestore.example_dags.tablestore_replication import dag  # noqa: F401"):
        ("tests/e2e/test_dag_definition.py", "import dag  # noqa: F401"),
    ("docs/spark.md", "from airflow_tablestore.example_dags.tablestore_replication import dag  # noqa: F401"):
        ("tests/e2e/test_dag_definition.py", "import dag  # noqa: F401"),
    ("docs/spark.md", "from airflow_tablestore.example_dags.tablestore_spark_job import dag  # noqa: F401"):
        ("tests/e2e/test_dag_definition.py", "import dag  # noqa: F401"),
    ("docs/spark.md", "from airflow_tablestore.example_dags.tablestore_stream_job import dag  # noqa: F401"):
        ("tests/e2e/test_dag_definition.py", "import dag  # noqa: F401"),
}

# the packaged jobs' cores, excerpts of the job files that tests/e2e runs with spark-submit (test_spark_job_dag.py,
# test_stream_job_scheduler.py)
JOB_CORES = {
    ("docs/spark.md", 'orders = (spark.read.format("tablestore")'):
        "airflow_tablestore/example_dags/jobs/tablestore_aggregate.py",
    ("docs/spark.md", 'reader = (spark.readStream.format("tablestore")'):
        "airflow_tablestore/example_dags/jobs/tablestore_stream_changes.py",
}

NOT_RUN = {
    ("README.md", "from airflow_tablestore.client import ("):
        "TunnelWorker(...).run() runs until stopped (the worker: tests/client/tunnel/)",
    ("docs/tunnel-worker.md", "from airflow_tablestore.client import CallbackProcessor, TunnelWorker, "
                              "TunnelWorkerConfig"):
        "worker.run() runs until stopped (tests/client/tunnel/)",
    ("docs/stream-worker.md", "from airflow_tablestore.client.stream.config import StreamWorkerConfig"):
        "a sketch with '...' between start() and shutdown() (the worker: tests/client/stream/)",
    ("docs/plainbuffer.md", "from airflow_tablestore.client.model import Column, CellOp, Row, INF_MIN, INF_MAX"):
        "its last lines name wire messages as placeholders (get_range_response, tunnel_record; "
        "tests/client/plainbuffer/)",
    ("docs/airflow.md", "from airflow_tablestore.hooks.table import TablestoreHook"):
        "a sketch with a top-level await and a placeholder cutoff_ns (the hooks: tests/hooks/)",
}

ENDPOINT_PLACEHOLDERS = ("https://myinst.cn-hangzhou.ots.aliyuncs.com",)


def _with_emulator(text: str, emulator: Any) -> str:
    for placeholder in ENDPOINT_PLACEHOLDERS:
        text = text.replace(placeholder, emulator.endpoint)
    return text.replace('"myinst"', repr(emulator.instance)).replace("tablestore://myinst/",
                                                                     f"tablestore://{emulator.instance}/")


def _namespace(emulator: Any) -> dict[str, Any]:
    """The connection placeholders of the pages, bound to the emulator."""
    return {"endpoint": emulator.endpoint, "instance_name": emulator.instance,
            "access_key_id": emulator.access_key_id, "access_key_secret": emulator.access_key_secret,
            "ak_id": emulator.access_key_id, "ak_secret": emulator.access_key_secret}


def _run(page: str, first_line: str, namespace: dict[str, Any], emulator: Any) -> dict[str, Any]:
    exec(compile(_with_emulator(block(page, first_line), emulator), f"{page}: {first_line}", "exec"), namespace)
    return namespace


# (page, first line) of the blocks this module runs (each by a test below)
RUN_HERE = {
    ("README.md", "from airflow_tablestore.client import PrimaryKeyColumn, PrimaryKeyType, TableSchema"),
    ("docs/client.md", "from airflow_tablestore.client import ("),
    ("docs/stream-worker.md", "from airflow_tablestore.client import TableClient"),
    ("docs/stream-worker.md", "from airflow_tablestore.client.stream.client import StreamClient"),
    ("docs/tunnel-worker.md", "from airflow_tablestore.client.tunnel.client import TunnelClient, FINISHED, Channel"),
    ("docs/emulator.md", 'with EmulatorProcess(extra_args=["--range-page-rows", "50"]) as emu:'),
    ("docs/airflow.md", "from airflow.sdk import Asset"),
    ("docs/airflow.md", "from airflow_tablestore.example_dags.tablestore_replication import replication_dag"),
    ("docs/airflow.md", "from airflow_tablestore.operators.table import TablestoreCreateTableOperator, "
                        "TablestoreDeleteTableOperator"),
    ("docs/airflow.md", "from airflow.sdk import TriggerRule"),
    ("docs/airflow.md", "from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor"),
    ("docs/airflow.md", "from airflow_tablestore.operators.verify import TablestoreVerifyReplicaOperator"),
}


def test_every_block_is_accounted_for() -> None:
    unaccounted = []
    for b in blocks():
        key = (b.page, b.first_line)
        if (b.language in NOT_CODE or b.language in ("bash", "sh", "shell") or b.page == "docs/first-hour.md"
                or key in RUN_BY or key in JOB_CORES or key in NOT_RUN or key in RUN_HERE):
            continue
        unaccounted.append(f"{b.page}:{b.line} ({b.language}) {b.first_line}")
    assert unaccounted == [], "blocks no test runs (add them to a list of tests/test_docs_blocks.py):\n" + \
        "\n".join(unaccounted)
    listed = [*RUN_BY, *JOB_CORES, *NOT_RUN, *RUN_HERE]
    present = {(b.page, b.first_line) for b in blocks()}
    assert [key for key in listed if key not in present] == []  # no stale entries


@pytest.fixture
def no_orders(tablestore_client: Any) -> Any:
    """The pages' examples create ``orders``: none before and after each test (the emulator is the session's)."""
    def drop() -> None:
        if "orders" in tablestore_client.list_tables():
            tablestore_client.delete_table("orders")

    drop()
    yield tablestore_client
    drop()


@pytest.mark.parametrize("key", sorted(RUN_BY), ids=lambda k: f"{k[0]}:{k[1][:40]}")
def test_the_test_that_runs_it_reads_it_from_the_page(key: tuple[str, str]) -> None:
    test_file, finder = RUN_BY[key]
    source = (REPO / test_file).read_text()
    assert Path(key[0]).name in source and finder in source, f"{test_file} does not read {key} from {key[0]}"
    assert finder in block(*key)


@pytest.mark.parametrize("key", sorted(JOB_CORES), ids=lambda k: k[1][:40])
def test_a_job_core_is_the_job_file(key: tuple[str, str]) -> None:
    job = "\n".join(line.strip() for line in (REPO / JOB_CORES[key]).read_text().splitlines())
    excerpt = "\n".join(line.strip() for line in block(*key).splitlines())
    assert excerpt.strip() in job, f"{key[0]} shows {JOB_CORES[key]} differently"


def test_readme_fixture_example(tmp_path: Path) -> None:
    run_user_pytest(tmp_path, {"test_readme.py": block(
        "README.md", "from airflow_tablestore.client import PrimaryKeyColumn, PrimaryKeyType, TableSchema")},
        passed=1)


def test_client_quick_start(tablestore_emulator: Any, tablestore_client: Any, no_orders: Any) -> None:
    done = _run("docs/client.md", "from airflow_tablestore.client import (", _namespace(tablestore_emulator),
                tablestore_emulator)
    assert done["written"] == 10_000
    row = tablestore_client.get_row("orders", [("shop", "s1"), ("id", 1)])
    assert row.get("status") == "paid" and row.get("retries") == 1


def test_stream_worker_examples(tablestore_emulator: Any, tablestore_client: Any, no_orders: Any) -> None:
    from airflow_tablestore.client import PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema

    tablestore_client.create_table(TableSchema("orders", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    namespace = _run("docs/stream-worker.md", "from airflow_tablestore.client import TableClient",
                     _namespace(tablestore_emulator), tablestore_emulator)
    assert tablestore_client.describe_table("orders").stream.enabled is False  # its last line disables it
    tablestore_client.update_table("orders", stream=StreamSpec(True))
    for i in range(5):
        tablestore_client.put_row("orders", [("id", i)], {"v": i})
    handled: list[Any] = []
    namespace["handle"] = handled.extend  # "handle(result.records)": the reader's own function
    _run("docs/stream-worker.md", "from airflow_tablestore.client.stream.client import StreamClient", namespace,
         tablestore_emulator)
    assert sorted(r.primary_key[0][1] for r in handled) == list(range(5))
    namespace["tables"].close()


def test_tunnel_client_example(tablestore_emulator: Any, tablestore_client: Any, no_orders: Any) -> None:
    from airflow_tablestore.client import PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema

    tablestore_client.create_table(TableSchema("orders", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                               stream=StreamSpec(True)))
    done = _run("docs/tunnel-worker.md", "from airflow_tablestore.client.tunnel.client import TunnelClient, "
                "FINISHED, Channel", _namespace(tablestore_emulator), tablestore_emulator)
    assert done["desc"].tunnel.tunnel_id == done["tunnel_id"] and done["desc"].channels
    done["tc"].close()


def test_emulator_process_example(tablestore_emulator: Any) -> None:
    from airflow_tablestore.client import TableClient
    from airflow_tablestore.emulator.testing import EmulatorProcess

    done = _run("docs/emulator.md", 'with EmulatorProcess(extra_args=["--range-page-rows", "50"]) as emu:',
                {"EmulatorProcess": EmulatorProcess, "TableClient": TableClient}, tablestore_emulator)
    assert done["emu"].endpoint != tablestore_emulator.endpoint  # an emulator of its own, started and stopped
    done["client"].close()


def test_airflow_dag_examples(tablestore_emulator: Any) -> None:
    """The blocks that build operators, sensors, assets and a DAG: each runs as written (inside a DAG where it
    builds tasks), with the tasks it says are defined elsewhere as placeholders."""
    from datetime import datetime

    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    asset = _run("docs/airflow.md", "from airflow.sdk import Asset", {}, tablestore_emulator)["replica"]
    assert asset.uri == f"tablestore://{tablestore_emulator.instance}/orders_replica"
    factory = _run("docs/airflow.md",
                   "from airflow_tablestore.example_dags.tablestore_replication import replication_dag", {},
                   tablestore_emulator)["dag"]
    assert factory.dag_id == "orders_replication" and factory.params["source_table"] == "orders"
    with DAG("doc_blocks", schedule=None, start_date=datetime(2026, 11, 1)) as dag:
        _run("docs/airflow.md", "from airflow_tablestore.operators.table import TablestoreCreateTableOperator, "
             "TablestoreDeleteTableOperator", {}, tablestore_emulator)
        # "create_replica, create_tunnel, full_phase and wait_consume_point: as in example_dags/..."
        placeholders = {name: EmptyOperator(task_id=f"{name}_placeholder")
                        for name in ("create_replica", "create_tunnel", "full_phase", "wait_consume_point")}
        _run("docs/airflow.md", "from airflow.sdk import TriggerRule", placeholders, tablestore_emulator)
        _run("docs/airflow.md", "from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor",
             {}, tablestore_emulator)
        _run("docs/airflow.md", "from airflow_tablestore.operators.verify import TablestoreVerifyReplicaOperator",
             {}, tablestore_emulator)
    assert {"create_table", "create_replica", "create_tunnel", "choose_sink", "incremental_phase", "plan",
            "rebuild_prepare", "rebuild_swap", "announce", "wait_consumed", "verify_replica"} <= set(dag.task_ids)


def test_the_documented_spark_default_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `spark_default` values docs/airflow.md and docs/first-hour.md give for local mode and a standalone
    cluster are the masters the Spark provider's hook resolves, and docker-compose.yaml's is the standalone one."""
    import json

    import yaml
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    standalone = '{"conn_type": "spark", "host": "spark://spark-master", "port": 7077}'
    local = '{"conn_type": "spark", "host": "local[2]"}'
    for page in ("docs/airflow.md", "docs/first-hour.md"):
        text = (REPO / page).read_text()
        assert standalone in text and local in text, page
    for value, master in ((standalone, "spark://spark-master:7077"), (local, "local[2]")):
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DOC", value)
        assert SparkSubmitHook(conn_id="spark_doc")._connection["master"] == master
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    values = [json.loads(service["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"])
              for service in compose["services"].values()
              if "AIRFLOW_CONN_SPARK_DEFAULT" in (service.get("environment") or {})]
    assert values and all((v["host"], v["port"]) == ("spark://spark-master", 7077) for v in values), values
