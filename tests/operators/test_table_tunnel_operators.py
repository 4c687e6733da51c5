"""Table and tunnel operators against the emulator: success, idempotent re-run, failure paths."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_helpers import simple_schema, unique

from airflow_tablestore.client.model import (
    MAX_TIME_DEVIATION,
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableOptions,
    TableSchema,
    TunnelType,
)
from airflow_tablestore.operators._lineage import dataset_namespace
from airflow_tablestore.operators.table import (
    TableSchemaMismatchError,
    TablestoreCreateTableOperator,
    TablestoreDeleteTableOperator,
)
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator, TablestoreDeleteTunnelOperator

CTX: Any = {}


def _create(name: str, conn: str, **kwargs: Any) -> TablestoreCreateTableOperator:
    kwargs.setdefault("primary_key", [("id", "string"), {"name": "seq", "type": "INTEGER"}])
    return TablestoreCreateTableOperator(task_id=unique("create"), table_name=name, tablestore_conn_id=conn,
                                         **kwargs)


def test_templated_fields_cover_conn_ids_and_names() -> None:
    assert {"tablestore_conn_id", "source_tablestore_conn_id", "table_name", "source_table"} <= set(
        TablestoreCreateTableOperator.template_fields)
    assert {"tablestore_conn_id", "table_name"} <= set(TablestoreDeleteTableOperator.template_fields)
    for op in (TablestoreCreateTunnelOperator, TablestoreDeleteTunnelOperator):
        assert {"tablestore_conn_id", "table_name", "tunnel_name"} <= set(op.template_fields)


# -- create / delete table --------------------------------------------------------------------------


def test_create_table_then_idempotent_rerun(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    name = unique("op_t")
    options = {"time_to_live": -1, "max_versions": 3, "max_time_deviation": 86400, "allow_update": True}
    result = _create(name, tablestore_airflow_conn, options=options,
                     stream={"enabled": True, "expiration_hours": 24},
                     defined_columns=[("v", "double")]).execute(CTX)
    assert result["created"] is True and result["table_name"] == name
    assert result["uri"] == f"tablestore://emulator/{name}"
    described = tablestore_client.describe_table(name)
    assert [c.name for c in described.schema.primary_key] == ["id", "seq"]
    assert described.schema.options.max_versions == 3
    assert described.stream.enabled

    again = _create(name, tablestore_airflow_conn, options=options, stream=True,
                    defined_columns=[("v", "double")]).execute(CTX)
    assert again["created"] is False


def test_create_table_with_different_schema_fails_naming_differences(tablestore_airflow_conn: str) -> None:
    name = unique("op_t")
    _create(name, tablestore_airflow_conn).execute(CTX)
    with pytest.raises(AirflowFailException) as info:  # no retry: the same schema will be there next time
        _create(name, tablestore_airflow_conn, primary_key=[("id", "string")],
                options={"max_versions": 2}).execute(CTX)
    assert isinstance(info.value.__cause__, TableSchemaMismatchError)
    message = str(info.value)
    assert "primary key" in message and "max_versions" in message and name in message


def test_create_table_requires_a_schema(tablestore_airflow_conn: str) -> None:
    with pytest.raises(AirflowFailException, match="primary_key is required"):
        _create(unique("op_t"), tablestore_airflow_conn, primary_key=None).execute(CTX)
    with pytest.raises(AirflowFailException, match="either primary_key or source_table"):
        _create(unique("op_t"), tablestore_airflow_conn, source_table="x").execute(CTX)


@pytest.mark.parametrize(("primary_key", "defined_columns", "fragment"), [
    ([("id", "FLOAT")], [], "primary-key column 'id': type 'FLOAT' is not a Tablestore primary-key type; "
                            "use one of INTEGER, STRING, BINARY"),
    ([("id", "INTEGER")], [("at", "DATETIME")], "defined column 'at': type 'DATETIME' is not a Tablestore "
                                                "column type; use one of INTEGER, DOUBLE, BOOLEAN, "
                                                "STRING, BINARY"),
    ([{"name": "id"}], [], "needs 'name' and 'type'"),
    (["id"], [], "is (name, type)"),
])
def test_a_wrong_schema_type_fails_when_the_dag_is_parsed(primary_key: Any, defined_columns: Any,
                                                          fragment: str) -> None:
    with pytest.raises(ValueError) as info:  # in the operator's constructor: the DAG file does not import
        _create(unique("op_t"), "tablestore_default", primary_key=primary_key, defined_columns=defined_columns)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_replica_copies_schema_options_not_the_stream_and_raises_time_deviation(
    tablestore_airflow_conn: str, tablestore_client: Any, tablestore_emulator: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = unique("src")
    tablestore_client.create_table(TableSchema(
        name=source,
        primary_key=(PrimaryKeyColumn("pk", PrimaryKeyType.STRING),
                     PrimaryKeyColumn("n", PrimaryKeyType.INTEGER)),
        options=TableOptions(time_to_live=-1, max_versions=5, max_time_deviation=3600),
        stream=StreamSpec(enabled=True, expiration_hours=48),
    ))
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_SOURCE", tablestore_emulator.airflow_connection_json())
    target = unique("replica")
    op = TablestoreCreateTableOperator(task_id="replica", table_name=target, source_table=source,
                                       source_tablestore_conn_id="tablestore_source",
                                       tablestore_conn_id=tablestore_airflow_conn)
    assert op.execute(CTX)["created"] is True
    replica = tablestore_client.describe_table(target)
    assert [(c.name, c.type) for c in replica.schema.primary_key] == [
        ("pk", PrimaryKeyType.STRING), ("n", PrimaryKeyType.INTEGER)]
    assert replica.schema.options.max_versions == 5
    assert replica.schema.options.max_time_deviation == MAX_TIME_DEVIATION
    assert not replica.stream.enabled  # a replica needs no stream of its own
    assert op.execute(CTX)["created"] is False  # idempotent
    tablestore_client.update_table(source, stream=StreamSpec(enabled=False))  # the source's stream changes ...
    assert op.execute(CTX)["created"] is False  # ... and the replica still fits
    tablestore_client.update_table(target, stream=StreamSpec(enabled=True))  # a stream on the replica is the user's
    assert op.execute(CTX)["created"] is False
    # execute closed the clients of both cached hooks (the source's is on another connection) and forgot them
    assert "hook" not in vars(op) and "source_hook" not in vars(op)
    assert op.source_hook is not op.hook

    with pytest.raises(AirflowFailException, match="does not exist"):
        TablestoreCreateTableOperator(task_id="r2", table_name=unique("replica"),
                                      source_table=unique("missing"),
                                      tablestore_conn_id=tablestore_airflow_conn).execute(CTX)


def test_delete_table_is_idempotent(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    name = unique("op_t")
    tablestore_client.create_table(simple_schema(name, stream=False))
    op = TablestoreDeleteTableOperator(task_id="drop", table_name=name,
                                       tablestore_conn_id=tablestore_airflow_conn)
    assert op.execute(CTX) is True
    assert name not in tablestore_client.list_tables()
    assert op.execute(CTX) is False


def test_bad_connection_fails_with_the_field_named(monkeypatch: pytest.MonkeyPatch,
                                                   tablestore_emulator: Any) -> None:
    conn = json.loads(tablestore_emulator.airflow_connection_json())
    conn["extra"] = {}
    monkeypatch.setenv("AIRFLOW_CONN_TS_NOINST", json.dumps(conn))
    with pytest.raises(AirflowFailException, match="instance_name"):
        TablestoreDeleteTableOperator(task_id="d", table_name="t",
                                      tablestore_conn_id="ts_noinst").execute(CTX)


# -- create / delete tunnel -------------------------------------------------------------------------


def _tunnel_op(table: str, name: str, conn: str, **kwargs: Any) -> TablestoreCreateTunnelOperator:
    return TablestoreCreateTunnelOperator(task_id=unique("tun"), table_name=table, tunnel_name=name,
                                          tablestore_conn_id=conn, **kwargs)


def test_create_tunnel_returns_id_and_is_idempotent(tablestore_airflow_conn: str, stream_table: str,
                                                    tablestore_tunnel_client: Any) -> None:
    tunnel_id = _tunnel_op(stream_table, "t1", tablestore_airflow_conn).execute(CTX)
    described = tablestore_tunnel_client.describe_tunnel(stream_table, "t1")
    assert described.tunnel.tunnel_id == tunnel_id
    assert described.tunnel.tunnel_type == TunnelType.BASE_AND_STREAM
    assert _tunnel_op(stream_table, "t1", tablestore_airflow_conn).execute(CTX) == tunnel_id
    assert len([t for t in tablestore_tunnel_client.list_tunnels(stream_table) if t.tunnel_name == "t1"]) == 1


@pytest.mark.parametrize("given", [None, TunnelType.BASE_DATA, "Stream"])
def test_tunnel_type_survives_template_rendering(given: TunnelType | str | None) -> None:
    """tunnel_type is templated: Jinja renders str(value), so an enum must be stored as its plain value."""
    kwargs = {} if given is None else {"tunnel_type": given}
    op = TablestoreCreateTunnelOperator(task_id="t", table_name="t", tunnel_name="n", **kwargs)
    rendered = op.render_template(op.tunnel_type, {})
    assert rendered == TunnelType(given or TunnelType.BASE_AND_STREAM).value
    assert TunnelType(rendered) is TunnelType(given or TunnelType.BASE_AND_STREAM)


def test_create_tunnel_type_conflict_and_invalid_type(tablestore_airflow_conn: str,
                                                      stream_table: str) -> None:
    _tunnel_op(stream_table, "t2", tablestore_airflow_conn, tunnel_type="Stream").execute(CTX)
    with pytest.raises(Exception, match="already exists with type Stream, wanted BaseData"):
        _tunnel_op(stream_table, "t2", tablestore_airflow_conn, tunnel_type=TunnelType.BASE_DATA).execute(CTX)
    with pytest.raises(AirflowFailException, match="tunnel_type must be one of"):
        _tunnel_op(stream_table, "t3", tablestore_airflow_conn, tunnel_type="Everything").execute(CTX)


def test_create_stream_tunnel_with_templated_offsets(tablestore_airflow_conn: str, stream_table: str,
                                                     tablestore_tunnel_client: Any) -> None:
    start = datetime.now(UTC) - timedelta(seconds=5)
    end = start + timedelta(hours=1)
    tunnel_id = _tunnel_op(stream_table, "backfill", tablestore_airflow_conn, tunnel_type="Stream",
                           stream_start=start.isoformat(), stream_end=end.isoformat()).execute(CTX)
    info = tablestore_tunnel_client.describe_tunnel(stream_table, "backfill").tunnel
    assert info.tunnel_id == tunnel_id and info.tunnel_type == TunnelType.STREAM


def test_create_tunnel_on_missing_table_fails(tablestore_airflow_conn: str) -> None:
    from airflow_tablestore.client.errors import TablestoreServiceError

    with pytest.raises(AirflowFailException) as info:  # a missing table is final: no retries
        _tunnel_op(unique("missing"), "t", tablestore_airflow_conn).execute(CTX)
    assert isinstance(info.value.__cause__, TablestoreServiceError)


def test_create_tunnel_on_a_table_without_a_stream(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    from airflow_tablestore.client.errors import StreamNotEnabledError

    table = unique("nostream")
    tablestore_client.create_table(simple_schema(table, stream=False))
    with pytest.raises(AirflowFailException) as info:  # one clear step, no retries
        _tunnel_op(table, "copy", tablestore_airflow_conn).execute(CTX)
    assert isinstance(info.value.__cause__, StreamNotEnabledError)
    assert "enable_stream=True" in str(info.value) and "update_table" in str(info.value)
    assert not tablestore_client.describe_table(table).stream.enabled  # the source is left alone by default

    enabling = _tunnel_op(table, "copy", tablestore_airflow_conn, enable_stream=True)
    tunnel_id = enabling.execute(CTX)
    assert tablestore_client.describe_table(table).stream.enabled
    assert enabling.execute(CTX) == tunnel_id  # idempotent: the stream is on, the tunnel exists
    with pytest.raises(ValueError, match="enable_stream must be True or False"):
        _tunnel_op(table, "copy", tablestore_airflow_conn, enable_stream="yes")


def test_wrong_secret_fails_at_once_but_transient_errors_stay_retryable(
        monkeypatch: pytest.MonkeyPatch, tablestore_emulator: Any, tablestore_airflow_conn: str) -> None:
    from airflow_tablestore.client.errors import AuthError, ThrottledError

    conn = json.loads(tablestore_emulator.airflow_connection_json())
    conn["password"] = "not-the-secret"
    monkeypatch.setenv("AIRFLOW_CONN_TS_WRONG", json.dumps(conn))
    with pytest.raises(AirflowFailException) as info:
        TablestoreDeleteTableOperator(task_id="d", table_name="t", tablestore_conn_id="ts_wrong").execute(CTX)
    assert isinstance(info.value.__cause__, AuthError) and "OTSAuthFailed" in str(info.value)
    # a 503 is not final: it surfaces as itself, so Airflow's retries apply
    tablestore_emulator.control.add_fault("/DeleteTable", "OTSServerBusy", count=20)
    try:
        with pytest.raises(ThrottledError):
            TablestoreDeleteTableOperator(task_id="d2", table_name="t",
                                          tablestore_conn_id=tablestore_airflow_conn).execute(CTX)
    finally:
        tablestore_emulator.control.clear_faults()


def test_delete_tunnel_is_idempotent(tablestore_airflow_conn: str, stream_table: str,
                                     tablestore_tunnel_client: Any) -> None:
    tablestore_tunnel_client.create_tunnel(stream_table, "gone", TunnelType.STREAM)
    op = TablestoreDeleteTunnelOperator(task_id="dt", table_name=stream_table, tunnel_name="gone",
                                        tablestore_conn_id=tablestore_airflow_conn)
    assert op.execute(CTX) is True
    assert [t for t in tablestore_tunnel_client.list_tunnels(stream_table) if t.tunnel_name == "gone"] == []
    assert op.execute(CTX) is False
    missing_table = TablestoreDeleteTunnelOperator(task_id="dt2", table_name=unique("missing"),
                                                   tunnel_name="x",
                                                   tablestore_conn_id=tablestore_airflow_conn)
    assert missing_table.execute(CTX) is False


# -- lineage ----------------------------------------------------------------------------------------


def test_openlineage_facets_without_the_optional_dependency(tablestore_airflow_conn: str) -> None:
    if importlib.util.find_spec("airflow.providers.openlineage") is not None:
        pytest.skip("OpenLineage provider installed")
    assert _create("lineage_t", tablestore_airflow_conn).get_openlineage_facets_on_complete(None) is None


def test_openlineage_dataset_names(
    tablestore_airflow_conn: str, tablestore_emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-ins for the OpenLineage classes (optional dependency) record what the operator builds."""
    import sys
    from types import ModuleType, SimpleNamespace

    facet, extractors = ModuleType("facet"), ModuleType("extractors")
    facet.Dataset = lambda namespace, name: (namespace, name)  # type: ignore[attr-defined]
    extractors.OperatorLineage = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "airflow.providers.common.compat.openlineage.facet", facet)
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.extractors", extractors)
    monkeypatch.setenv("AIRFLOW_CONN_TABLESTORE_OTHER", tablestore_emulator.airflow_connection_json())

    replica = TablestoreCreateTableOperator(task_id="r", table_name="dst", source_table="src",
                                            source_tablestore_conn_id="tablestore_other",
                                            tablestore_conn_id=tablestore_airflow_conn)
    lineage = replica.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == [("tablestore://emulator", "src")]
    assert lineage.outputs == [("tablestore://emulator", "dst")]
    tunnel = _tunnel_op("src", "tn", tablestore_airflow_conn).get_openlineage_facets_on_complete(None)
    assert tunnel.inputs == [("tablestore://emulator", "src")] and tunnel.outputs == []
    assert dataset_namespace("inst") == "tablestore://inst"


def test_execute_closes_the_cached_hooks_client_however_it_ends(tablestore_airflow_conn: str,
                                                                 stream_table: str) -> None:
    """The base operator closes its cached hook's client (its HTTP pool) when ``execute`` ends: after a
    success, and after a failure."""
    delete = TablestoreDeleteTunnelOperator(task_id=unique("delete"), table_name=stream_table,
                                            tunnel_name=unique("absent"), tablestore_conn_id=tablestore_airflow_conn)
    closed: list[str] = []
    original_close = delete.hook.close

    def close() -> None:
        closed.append("closed" if delete.hook._client is not None else "nothing open")
        original_close()

    delete.hook.close = close  # type: ignore[method-assign]
    assert delete.execute(CTX) is False
    assert closed == ["closed"] and delete.hook._client is None
    create = TablestoreCreateTunnelOperator(task_id=unique("create"), table_name=unique("missing"),
                                            tunnel_name="t", tablestore_conn_id=tablestore_airflow_conn)
    with pytest.raises(AirflowFailException):
        create.execute(CTX)
    assert "hook" not in vars(create)  # closed and forgotten after a failure too


def test_a_task_run_again_uses_its_connection_ids_as_rendered_then(tablestore_airflow_conn: str,
                                                                   stream_table: str) -> None:
    """``dag.test()`` runs the same task object again: a connection id rendered differently the next time is
    the one used (the hooks of the previous run are not kept)."""
    delete = TablestoreDeleteTunnelOperator(task_id=unique("delete"), table_name=stream_table,
                                            tunnel_name=unique("absent"), tablestore_conn_id=tablestore_airflow_conn)
    assert delete.execute(CTX) is False
    delete.tablestore_conn_id = "no_such_connection"
    with pytest.raises(AirflowFailException, match="'no_such_connection' is not defined"):
        delete.execute(CTX)
    delete.tablestore_conn_id = tablestore_airflow_conn
    assert delete.execute(CTX) is False
