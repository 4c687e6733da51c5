"""Every argument of every operator and sensor, fed a wrong value: the task fails with one try and one line.

One table (``CASES``): the task class, the argument, the wrong value, when it fails and words of the message.
``parse``: the constructor raises (the DAG file does not import: earlier than any try). ``run``: ``execute``
raises ``AirflowFailException`` (Airflow fails the task without its retries); every task is built with
``retries=2``. Either way the message is one line naming the argument and what is valid. Two cases also run
through ``dag.test()`` to show Airflow's retry machinery ends them failed after try 1.

The other arguments are valid and name a real table and tunnel of the session emulator, so each failure is the
wrong argument's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_helpers import simple_schema, unique

from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator
from airflow_tablestore.operators.rebuild import (
    TablestoreCreateRebuildTunnelOperator,
    TablestoreSwapRebuiltPartitionsOperator,
)
from airflow_tablestore.operators.replication import (
    TablestoreAnnounceReplicationOperator,
    TablestoreReplicationPlanOperator,
    TablestoreReplicationSinkBranchOperator,
)
from airflow_tablestore.operators.spark_submit import (
    CONSUMER_APPLICATION,
    TablestoreSparkSubmitOperator,
    consumer_arguments,
)
from airflow_tablestore.operators.table import TablestoreCreateTableOperator, TablestoreDeleteTableOperator
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator, TablestoreDeleteTunnelOperator
from airflow_tablestore.operators.verify import TablestoreVerifyReplicaOperator
from airflow_tablestore.sensors.row import TablestoreRowSensor
from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

TABLE = unique("argerr")  # created (stream on) by the module fixture, with the tunnel TUNNEL on it
TUNNEL = "argerr_tunnel"
MISSING_CONN = "no_such_connection"
NAME_RULE = "letters, digits and underscores"  # what the table-name messages say is valid
BASE_AND_STREAM = "'BaseAndStream'"
CONSUMER = {"table": TABLE, "tunnel": TUNNEL, "phase": "full", "sink": "parquet", "sink_path": "/tmp/argerr"}


def _valid(task: type) -> dict[str, Any]:
    """Valid arguments of each task (besides task_id and retries)."""
    return {
        TablestoreCreateTableOperator: {"table_name": unique("argerr_new"), "primary_key": [("id", "STRING")]},
        TablestoreDeleteTableOperator: {"table_name": unique("argerr_gone")},
        TablestoreCreateTunnelOperator: {"table_name": TABLE, "tunnel_name": unique("argerr_tn")},
        TablestoreDeleteTunnelOperator: {"table_name": TABLE, "tunnel_name": unique("argerr_gone")},
        TablestoreTunnelConsumeOperator: {"table_name": TABLE, "tunnel_name": TUNNEL, "apply_function": len,
                                          "max_seconds": 1.0},
        TablestoreCreateRebuildTunnelOperator: {"table_name": TABLE, "tunnel_name": TUNNEL,
                                                "parquet_path": "/tmp/argerr_log"},
        TablestoreSwapRebuiltPartitionsOperator: {"table_name": TABLE, "tunnel_name": "argerr_rebuild",
                                                  "parquet_path": "/tmp/argerr_log",
                                                  "staging_path": "/tmp/argerr_log/_rebuild/x"},
        TablestoreReplicationSinkBranchOperator: {"sink_type": "tablestore", "parquet_path": "", "source_table": TABLE,
                                                  "destination_table": TABLE + "_replica",
                                                  "tablestore_sink_task_id": "create",
                                                  "parquet_sink_task_id": "tunnel"},
        TablestoreReplicationPlanOperator: {"table_name": TABLE, "tunnel_name": TUNNEL, "sink_type": "tablestore",
                                            "full_phase_task_id": "full", "incremental_phase_task_id": "inc",
                                            "rebuild_task_id": "rebuild", "wait_task_id": "wait"},
        TablestoreAnnounceReplicationOperator: {"sink_type": "tablestore", "destination_table": TABLE,
                                                "parquet_path": None, "phase_task_ids": ["full", "inc"]},
        TablestoreSparkSubmitOperator: {"application": CONSUMER_APPLICATION, "tablestore_conn_id": "tablestore_default",
                                        "sink_tablestore_conn_id": "tablestore_default",
                                        "application_args": consumer_arguments(**CONSUMER)},
        TablestoreTunnelConsumePointSensor: {"table_name": TABLE, "tunnel_name": TUNNEL, "cutoff": "2999-01-01",
                                             "deferrable": False, "poke_interval": 0.1, "timeout": 1},
        TablestoreRowSensor: {"table_name": TABLE, "primary_key": {"id": "a", "seq": 1}, "deferrable": False,
                              "poke_interval": 0.1, "timeout": 1},
        TablestoreVerifyReplicaOperator: {"source_table": TABLE, "destination_table": TABLE},
    }[task]


@dataclass(frozen=True)
class Case:
    """``task(**valid, argument=wrong)`` fails ``when`` ("parse" or "run") with a one-line message holding
    ``words`` (case-insensitive). ``rendered``: the argument is templated and holds Jinja when the DAG is parsed;
    ``wrong`` is what it renders to."""

    task: type
    argument: str
    wrong: Any
    when: str
    words: tuple[str, ...]
    rendered: bool = False
    valid: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        # the module's table name holds the process id: the id names it TABLE, so that every pytest-xdist
        # worker collects the same ids
        wrong = repr(self.wrong).replace(repr(TABLE), "TABLE")
        return f"{self.task.__name__.removeprefix('Tablestore')}-{self.argument}={wrong}"[:90]


def _cases(task: type, *rows: tuple[Any, ...], **valid: Any) -> list[Case]:
    return [Case(task, argument, wrong, when, tuple(words), rendered="rendered" in rest, valid=valid)
            for argument, wrong, when, words, *rest in rows]


def _consumer_args(**changes: Any) -> list[str]:
    return consumer_arguments(**(CONSUMER | changes))


CONNECTION = ("tablestore_conn_id", MISSING_CONN, "run", [MISSING_CONN, "not defined"])
EMPTY_TABLE = ("table_name", "", "run", ["table_name", NAME_RULE])
BAD_TABLE = ("table_name", "1st-table", "run", ["table_name", "'1st-table'", NAME_RULE])
NOT_A_TABLE = ("table_name", 42, "run", ["table_name", "42", NAME_RULE])
EMPTY_TUNNEL = ("tunnel_name", "", "run", ["tunnel_name", "non-empty"])
CUTOFF = ("cutoff", "25/11/2026 10:00", "run", ["cutoff '25/11/2026 10:00' is not a time: give an ISO-8601 time"])

CASES: list[Case] = [
    *_cases(
        TablestoreCreateTableOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, NOT_A_TABLE,
        ("region", 5, "run", ["region", "string"]),
        ("primary_key", [("id", "FLOAT")], "parse", ["primary-key column 'id'", "INTEGER, STRING, BINARY"]),
        ("primary_key", "id", "parse", ["primary_key", "(name, type)"]),
        ("primary_key", [{"name": "id"}], "parse", ["'name' and 'type'"]),
        ("primary_key", [], "run", ["primary_key is required", "source_table"]),
        ("defined_columns", [("at", "DATETIME")], "parse", ["defined column 'at'", "DOUBLE, BOOLEAN"]),
        ("defined_columns", {"v": "DOUBLE"}, "parse", ["defined_columns", "(name, type)"]),
        ("options", {"ttl": 5}, "parse", ["options", "'ttl'", "max_versions"]),
        ("options", "max_versions=1", "parse", ["options", "TableOptions"]),
        ("stream", "yes", "parse", ["stream", "True/False"]),
        ("stream", {"expiration_hour": 24}, "parse", ["stream", "'expiration_hour'", "expiration_hours"]),
        ("reserved_throughput", (1,), "parse", ["reserved_throughput", "(read, write)"]),
        ("reserved_throughput", (-1, 0), "parse", ["reserved_throughput", "(read, write)"]),
        ("source_table", TABLE, "run", ["either primary_key or source_table"]),
        ("raise_max_time_deviation", "no", "parse", ["raise_max_time_deviation", "True or False"]),
    ),
    *_cases(TablestoreCreateTableOperator,  # a replica of source_table
            ("source_table", "no_such_source", "run", ["source table 'no_such_source' does not exist"]),
            ("source_table", "bad-source", "run", ["source_table", NAME_RULE]),
            ("source_tablestore_conn_id", MISSING_CONN, "run", [MISSING_CONN, "not defined"]),
            primary_key=None, source_table=TABLE),
    *_cases(TablestoreDeleteTableOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, NOT_A_TABLE,
            ("table_name", "x" * 256, "run", ["table_name", "1-255"])),
    *_cases(
        TablestoreCreateTunnelOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL,
        ("tunnel_name", None, "run", ["tunnel_name", "non-empty"]),
        ("tunnel_type", "Incremental", "run", ["tunnel_type", "'Incremental'", BASE_AND_STREAM]),
        ("tunnel_type", "{{ params.type }}", "run", ["tunnel_type", "'basedata'", BASE_AND_STREAM], "rendered"),
        ("stream_start", "yesterday", "run", ["stream_start", "'yesterday'", "ISO-8601"]),
        ("stream_end", "tomorrow", "run", ["stream_end", "'tomorrow'", "ISO-8601"]),
        ("enable_stream", "yes", "parse", ["enable_stream", "True or False"]),
    ),
    *_cases(TablestoreDeleteTunnelOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL),
    *_cases(
        TablestoreTunnelConsumeOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL, CUTOFF,
        ("tunnel_name", "no_such_tunnel", "run", ["no_such_tunnel", "create"]),
        ("apply_function", "handle", "run", ["apply_function", "'handle'", "dotted path"]),
        ("apply_function", "os.no_such_function", "run", ["apply_function", "cannot be imported"]),
        ("apply_function", "os.sep", "run", ["apply_function", "not callable"]),
        ("max_records", 0, "parse", ["max_records", "positive integer"]),
        ("max_records", "10", "parse", ["max_records", "positive integer"]),
        ("max_seconds", 0, "parse", ["max_seconds", "positive"]),
        ("max_seconds", "60", "parse", ["max_seconds", "positive number"]),
        ("heartbeat_interval", -1, "parse", ["heartbeat_interval", "positive"]),
    ),
    *_cases(
        TablestoreCreateRebuildTunnelOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL,
        ("parquet_path", "", "run", ["parquet_path", "non-empty"]),
    ),
    *_cases(
        TablestoreSwapRebuiltPartitionsOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL,
        ("parquet_path", "", "run", ["parquet_path", "non-empty"]),
        ("staging_path", " ", "run", ["staging_path", "non-empty"]),
        ("partition_by", "week", "parse", ["partition_by", "'week'", "hour, day"]),
    ),
    *_cases(
        TablestoreReplicationSinkBranchOperator,
        ("sink_type", "kafka", "run", ["sink_type", "'kafka'", "tablestore, parquet"]),
        ("sink_type", "{{ params.sink_type }}", "run", ["sink_type", "'Parquet'", "tablestore, parquet"],
         "rendered"),
        ("source_table", "", "run", ["source_table", NAME_RULE]),
        ("destination_table", "replica-1", "run", ["destination_table", NAME_RULE]),
        ("destination_table", TABLE, "run", ["would feed its own stream"]),
        ("tablestore_conn_id", "", "run", ["tablestore_conn_id", "non-empty"]),
        ("sink_tablestore_conn_id", "", "run", ["sink_tablestore_conn_id", "non-empty"]),
        ("tablestore_sink_task_id", "", "parse", ["tablestore_sink_task_id", "task id"]),
        ("parquet_sink_task_id", None, "parse", ["parquet_sink_task_id", "task id"]),
    ),
    *_cases(TablestoreReplicationSinkBranchOperator, ("parquet_path", "  ", "run", ["Change-log path"]),
            sink_type="parquet"),
    *_cases(
        TablestoreReplicationPlanOperator, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL,
        ("tunnel_name", "no_such_tunnel", "run", ["no_such_tunnel", "create"]),
        ("sink_type", "kafka", "run", ["sink_type", "'kafka'", "tablestore, parquet"]),
        ("partition_by", "week", "parse", ["partition_by", "'week'", "hour, day"]),
        ("full_phase_task_id", "", "parse", ["full_phase_task_id", "task id"]),
        ("wait_task_id", 7, "parse", ["wait_task_id", "task id"]),
    ),
    *_cases(
        TablestoreAnnounceReplicationOperator,
        ("sink_type", "kafka", "run", ["sink_type", "'kafka'", "tablestore, parquet"]),
        ("destination_table", "replica-1", "run", ["destination_table", NAME_RULE]),
        ("sink_tablestore_conn_id", MISSING_CONN, "run", [MISSING_CONN, "not defined"]),
        ("partition_by", "week", "parse", ["partition_by", "'week'", "hour, day"]),
        ("phase_task_ids", "full_phase", "parse", ["phase_task_ids", "list of task ids"]),
        ("asset_alias", "", "parse", ["asset_alias", "non-empty"]),
    ),
    *_cases(TablestoreAnnounceReplicationOperator, ("parquet_path", "", "run", ["Change-log path", "parquet_path"]),
            sink_type="parquet"),
    *_cases(
        TablestoreSparkSubmitOperator, CONNECTION,
        ("sink_tablestore_conn_id", MISSING_CONN, "run", [MISSING_CONN, "not defined"]),
        ("application_args", _consumer_args(records_per_channel=0), "run",
         ["--records-per-channel", "must be positive, got 0"]),
        ("application_args", _consumer_args(records_per_channel="{{ params.n }}"), "run",
         ["--records-per-channel", "must be positive, got -5"], "rendered"),
        ("application_args", _consumer_args(heartbeat_interval="0"), "run",
         ["--heartbeat-interval", "must be positive"]),
        ("application_args", _consumer_args(phase="half"), "run", ["--phase", "'half'", "'full', 'incremental'"]),
        ("application_args", _consumer_args(sink="kafka"), "run", ["--sink", "'kafka'", "'tablestore', 'parquet'"]),
        ("application_args", _consumer_args(partition_by="week"), "run",
         ["--partition-by", "'week'", "'none', 'hour', 'day'"]),
        ("application_args", _consumer_args(phase="incremental", cutoff="25/11/2026"), "run",
         ["--cutoff", "'25/11/2026'", "is not a time", "ISO-8601", "epoch"]),
        ("application_args", _consumer_args(phase="incremental"), "run", ["--phase incremental needs --cutoff"]),
        ("application_args", [*_consumer_args(), "--help"], "run", ["-h/--help", "usage"]),
    ),
    *_cases(
        TablestoreTunnelConsumePointSensor, CONNECTION, EMPTY_TABLE, BAD_TABLE, EMPTY_TUNNEL, CUTOFF,
        ("tunnel_name", "no_such_tunnel", "run", ["no_such_tunnel", "create"]),
        ("cutoff", "{{ data_interval_end }}", "run", ["cutoff", "'not a time'", "ISO-8601"], "rendered"),
        ("max_wait_seconds", 0, "parse", ["max_wait_seconds", "positive"]),
        ("poke_interval", -1, "parse", ["poke_interval", "non-negative"]),
        ("timeout", "1h", "parse", ["timeout", "non-negative"]),
        ("mode", "sometimes", "parse", ["mode", "poke", "reschedule"]),
    ),
    *_cases(
        TablestoreRowSensor, CONNECTION, EMPTY_TABLE, BAD_TABLE,
        ("primary_key", {}, "parse", ["primary_key", "{name: value}"]),
        ("primary_key", "id=1", "parse", ["primary_key", "{name: value}"]),
        ("primary_key", [("id",)], "parse", ["primary_key", "[(name, value), ...]"]),
        ("primary_key", {"id": 1.5}, "parse", ["primary-key column 'id'", "INTEGER and STRING"]),
        ("primary_key", "{{ params.key }}", "run", ["primary_key", "{name: value}"], "rendered"),
        ("column", "", "parse", ["column", "non-empty"]),
        ("max_wait_seconds", -1, "parse", ["max_wait_seconds", "positive"]),
    ),
    *_cases(TablestoreRowSensor, ("expected", "done", "parse", ["expected needs column"])),
    *_cases(
        TablestoreVerifyReplicaOperator, CONNECTION,
        ("sink_tablestore_conn_id", MISSING_CONN, "run", [MISSING_CONN, "not defined"]),
        ("source_table", "1st-table", "run", ["source_table", "'1st-table'", NAME_RULE]),
        ("destination_table", "", "run", ["destination_table", NAME_RULE]),
        ("destination_table", "no_such_replica", "run", ["OTSObjectNotExist", "'no_such_replica'"]),
        ("all_versions", "yes", "parse", ["all_versions", "True or False"]),
        ("max_differences", -1, "parse", ["max_differences", "integer >= 0"]),
        ("page_size", 0, "parse", ["page_size", "positive integer"]),
    ),
]

WRONG_RENDERINGS = {"{{ params.type }}": "basedata", "{{ params.sink_type }}": "Parquet",
                    "{{ data_interval_end }}": "not a time", "{{ params.key }}": "id=1",
                    "{{ params.n }}": "-5"}


@pytest.fixture(scope="module")
def emulator_objects(tablestore_emulator: Any) -> str:
    """The table and tunnel the valid arguments name."""
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient

    with TableClient(**tablestore_emulator.client_kwargs) as tables, \
            TunnelClient(**tablestore_emulator.client_kwargs) as tunnels:
        tables.create_table(simple_schema(TABLE))
        tunnels.create_tunnel(TABLE, TUNNEL, "BaseAndStream")
    return TABLE


@pytest.fixture
def connections(tablestore_airflow_conn: str, emulator_objects: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The emulator's connection; a Spark connection and spark-submit that must not be reached."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    import airflow_tablestore.spark.consumer.preflight as preflight

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setattr(preflight, "spark_submit_problem", lambda binary="spark-submit", path=None: None)

    def spark_submit(self: Any, context: Any) -> None:
        raise AssertionError(f"spark-submit ran with {self.application_args}")

    monkeypatch.setattr(SparkSubmitOperator, "execute", spark_submit)
    yield


def _context() -> Any:
    """The parts of a task's context these tasks read: a recent hour as the data interval."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    ti = SimpleNamespace(try_number=1, task_id="t", xcom_pull=lambda **kwargs: None,
                         xcom_push=lambda **kwargs: None)
    return {"ti": ti, "data_interval_start": end - timedelta(hours=1), "data_interval_end": end,
            "dag_run": SimpleNamespace(run_after=end, run_type="manual"), "outlet_events": {}}


def _build(case: Case) -> Any:
    kwargs = _valid(case.task) | case.valid
    kwargs[case.argument] = case.wrong
    return case.task(task_id=unique("argerr_task"), retries=2, **kwargs)


def _assert_one_line(message: str, case: Case) -> None:
    assert "\n" not in message, message
    missing = [word for word in case.words if word.lower() not in message.lower()]
    assert not missing, f"{missing} not in {message!r}"


def test_the_table_covers_every_operator_and_sensor() -> None:
    covered = {case.task for case in CASES}
    assert covered == {TablestoreCreateTableOperator, TablestoreDeleteTableOperator, TablestoreCreateTunnelOperator,
                       TablestoreDeleteTunnelOperator, TablestoreTunnelConsumeOperator,
                       TablestoreCreateRebuildTunnelOperator, TablestoreSwapRebuiltPartitionsOperator,
                       TablestoreReplicationSinkBranchOperator, TablestoreReplicationPlanOperator,
                       TablestoreAnnounceReplicationOperator, TablestoreSparkSubmitOperator,
                       TablestoreTunnelConsumePointSensor, TablestoreRowSensor, TablestoreVerifyReplicaOperator}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_a_wrong_argument_fails_at_once_in_one_line(case: Case, connections: None) -> None:
    if case.when == "parse":
        with pytest.raises((ValueError, TypeError)) as parsed:
            _build(case)
        _assert_one_line(str(parsed.value), case)
        return
    task = _build(case)
    if case.rendered:  # what rendering the template gives
        assert "{{" in json.dumps(getattr(task, case.argument)), "a templated case holds Jinja when parsed"
        assert case.argument in task.template_fields
        setattr(task, case.argument, _render(case.wrong))
    with pytest.raises(AirflowFailException) as failed:  # Airflow fails the task without its retries
        task.execute(_context())
    _assert_one_line(str(failed.value), case)


def _render(value: Any) -> Any:
    if isinstance(value, str):
        return WRONG_RENDERINGS.get(value, value)
    if isinstance(value, list):
        return [_render(item) for item in value]
    return value


def test_every_cutoff_error_has_one_form(connections: None) -> None:
    """The consume operator, the sensor and the Spark consumer word a malformed cutoff the same way."""
    from airflow_tablestore.spark.consumer.options import OptionsError, parse_cutoff

    bad = "25/11/2026 10:00"
    messages = []
    for task in (TablestoreTunnelConsumeOperator, TablestoreTunnelConsumePointSensor):
        with pytest.raises(AirflowFailException) as failed:
            task(task_id=unique("cutoff"), **(_valid(task) | {"cutoff": bad})).execute(_context())
        messages.append(str(failed.value))
    with pytest.raises(OptionsError) as refused:
        parse_cutoff(bad)
    messages.append(str(refused.value).replace("--cutoff", "cutoff") + " (not retried: retrying cannot fix this)")
    assert len(set(messages)) == 1, messages
    assert messages[0].startswith(f"cutoff {bad!r} is not a time: give an ISO-8601 time (2026-11-25T10:00:00Z) or "
                                  "epoch seconds/ms/us/ns")


# -- end to end: Airflow's retry machinery gives such a task one try ------------------------------------


@pytest.mark.parametrize(("build", "words"), [
    (lambda: TablestoreCreateTunnelOperator(task_id="create_tunnel", table_name=TABLE, tunnel_name="t",
                                            tunnel_type="Incremental"), ["tunnel_type", BASE_AND_STREAM]),
    (lambda: TablestoreDeleteTableOperator(task_id="delete_table", table_name=TABLE,
                                           tablestore_conn_id=MISSING_CONN), [MISSING_CONN, "not defined"]),
], ids=["unknown-tunnel-type", "missing-connection"])
def test_dag_test_ends_the_task_failed_after_one_try(build: Any, words: list[str], connections: None,
                                                     airflow_db: None, capfd: pytest.CaptureFixture[str]) -> None:
    from airflow.sdk import DAG

    with DAG(unique("argerr_dag"), schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC),
             default_args={"retries": 2, "retry_delay": timedelta(seconds=0)}) as dag:
        task = build()
    run = dag.test()
    [ti] = [ti for ti in run.get_task_instances() if ti.task_id == task.task_id]
    assert (ti.state, ti.try_number, ti.max_tries) == ("failed", 1, 2)
    output = capfd.readouterr()
    assert [line for line in (output.out + output.err).splitlines() if all(w in line for w in words)], \
        "the task log says in one line what is wrong"


# -- the replication DAG's form: out-of-range values are refused, not changed ------------------------------


@pytest.mark.parametrize(("name", "wrong"), [("records_per_channel", 0), ("records_per_channel", 10_000_001),
                                             ("records_per_channel", "50"), ("heartbeat_interval", 0),
                                             ("heartbeat_interval", 60)])
def test_the_replication_form_refuses_out_of_range_values(name: str, wrong: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    params = replication_dag(unique("form"), auto_register=False).params
    assert params[name] != wrong
    with pytest.raises(ParamValidationError):  # the trigger form and the API validate the params so
        params.get_param(name).resolve(wrong)
    changed = copy.deepcopy(params)
    with pytest.raises(ParamValidationError):  # a run's conf
        changed[name] = wrong
        changed.validate()
    with pytest.raises(ParamValidationError, match=name):  # the factory's defaults (scheduled runs)
        replication_dag(unique("form"), auto_register=False, **{name: wrong})


@pytest.mark.parametrize(("name", "wrong", "refused"), [
    ("records_per_channel", 0, "--records-per-channel: must be positive, got 0"),
    ("heartbeat_interval", 0, "--heartbeat-interval: must be positive, got 0"),
    ("heartbeat_interval", 90, "--heartbeat-interval must be shorter than --client-timeout"),
])
def test_the_replication_spark_tasks_refuse_what_reaches_them_anyway(name: str, wrong: Any, refused: str,
                                                                     connections: None) -> None:
    """A value outside the form's range that reaches a Spark task (a run's conf not validated, an edited
    DAG) fails it at once, before spark-submit starts: never clamped to the nearest valid value."""
    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    dag = replication_dag(unique("form"), auto_register=False, source_table=TABLE, tunnel_name=TUNNEL,
                          sink_type="parquet", parquet_path="/tmp/argerr_log")
    params = {key: dag.params[key] for key in dag.params} | {name: wrong}
    for task_id in ("full_phase", "incremental_phase"):
        task = dag.get_task(task_id)
        task.retries = 2
        end = datetime(2026, 11, 26, tzinfo=UTC)
        task.application_args = task.render_template(task.application_args, {
            "params": params, "data_interval_end": end, "dag_run": SimpleNamespace(run_after=end)})
        assert str(wrong) in task.application_args
        with pytest.raises(AirflowFailException) as failed:
            task.execute(_context())
        assert refused in str(failed.value) and "\n" not in str(failed.value)
