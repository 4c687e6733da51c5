"""The replication operators and their rules: parameter check, plan, retention, rebuild, announcement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import AssetAlias
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from airflow_helpers import unique

from airflow_tablestore.client.changelog import REBUILD_PENDING, prepare_rebuild
from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.operators.rebuild import (
    TablestoreCreateRebuildTunnelOperator,
    TablestoreSwapRebuiltPartitionsOperator,
    outside_retention,
)
from airflow_tablestore.operators.replication import (
    RUN_CUTOFF,
    TablestoreAnnounceReplicationOperator,
    TablestoreReplicationPlanOperator,
    TablestoreReplicationSinkBranchOperator,
    parameter_problems,
    plan_branches,
)
from airflow_tablestore.operators.spark_submit import consumer_arguments

DEFAULTS: dict[str, Any] = {  # the example DAG's defaults, with the tables set
    "tablestore_conn_id": "tablestore_default", "sink_tablestore_conn_id": "tablestore_default",
    "source_table": "orders", "destination_table": "orders_replica", "sink_type": "tablestore",
    "parquet_path": None,
}
H = datetime(2026, 11, 23, 13, tzinfo=UTC)
TUNNEL_BEFORE = int((H - timedelta(hours=5)).timestamp() * 1e9)  # the main tunnel's stream began before H
TUNNEL_AFTER = int((H - timedelta(minutes=30)).timestamp() * 1e9)  # ... or inside [H-1h, H)
TASK_IDS = {"full_phase_task_id": "full_phase", "incremental_phase_task_id": "incremental_phase",
            "rebuild_task_id": "rebuild_prepare", "wait_task_id": "wait_consume_point"}


def _context(start: datetime | None = None, end: datetime | None = None, *, try_number: int = 1,
             run_type: str = "manual", xcom: dict[tuple[str, str], Any] | None = None,
             run_after: datetime | None = None) -> Any:
    """The parts of a task's context the replication operators read; ``xcom`` maps (task id, key) to a
    value, and what the task pushes lands there too."""
    xcom = {} if xcom is None else xcom
    events: dict[Any, list[tuple[Any, dict[str, Any]]]] = {}

    class Events:
        def __getitem__(self, alias: AssetAlias) -> Any:
            added = events.setdefault(alias.name, [])
            return SimpleNamespace(add=lambda asset, extra: added.append((asset, extra)))

    ti = SimpleNamespace(
        try_number=try_number,
        xcom_pull=lambda task_ids, key="return_value": xcom.get((task_ids, key)),
        xcom_push=lambda key, value: xcom.__setitem__(("<this task>", key), value))
    context: dict[str, Any] = {"ti": ti, "outlet_events": Events(), "events": events,
                               "dag_run": SimpleNamespace(run_after=run_after or end or H, run_type=run_type)}
    if start is not None:
        context["data_interval_start"] = start
    if end is not None:
        context["data_interval_end"] = end
    return context


# -- parameters --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "problem"), [
    ({"sink_type": "parquet", "parquet_path": None}, "needs 'Change-log path'"),
    ({"sink_type": "parquet", "parquet_path": "  "}, "needs 'Change-log path'"),
    ({"destination_table": "orders", "source_table": "orders"}, "would feed its own stream"),
    ({"sink_type": "parquet", "parquet_path": "/data/log", "destination_table": "orders",
      "source_table": "orders"}, None),  # the destination table is ignored with the Parquet sink
    ({"destination_table": "orders", "source_table": "orders", "sink_tablestore_conn_id": "other"}, None),
])
def test_parameter_combinations(changes: dict[str, Any], problem: str | None) -> None:
    problems = parameter_problems(**(DEFAULTS | changes))
    assert (problem in " ".join(problems)) if problem else problems == []


def test_an_unedited_copy_of_the_example_fails_at_once_naming_the_defaults_to_set() -> None:
    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    params = replication_dag("unedited_copy", auto_register=False).params
    branch = TablestoreReplicationSinkBranchOperator(
        task_id=unique("choose_sink"), tablestore_sink_task_id="create_table", parquet_sink_task_id="tunnel",
        **(DEFAULTS | {"source_table": params["source_table"], "destination_table": params["destination_table"]}))
    with pytest.raises(AirflowFailException) as failed:
        branch.choose_branch(_context())
    message = str(failed.value)
    assert "placeholders (source_table='source_table', destination_table='replica_table')" in message
    assert "replication_dag(source_table=" in message and "\n" not in message


def test_sink_branch_fails_at_once_on_a_bad_combination_and_follows_the_sink() -> None:
    def branch(**changes: Any) -> TablestoreReplicationSinkBranchOperator:
        return TablestoreReplicationSinkBranchOperator(
            task_id=unique("choose_sink"), tablestore_sink_task_id="create_table",
            parquet_sink_task_id="tunnel", **(DEFAULTS | changes))

    assert branch().choose_branch(_context()) == "create_table"
    assert branch(sink_type="parquet", parquet_path="/data/log").choose_branch(_context()) == "tunnel"
    with pytest.raises(AirflowFailException, match="invalid parameters: the Parquet sink needs"):
        branch(sink_type="parquet", parquet_path="").choose_branch(_context())
    assert {"sink_type", "parquet_path", "source_table", "destination_table", "tablestore_conn_id",
            "sink_tablestore_conn_id"} <= set(TablestoreReplicationSinkBranchOperator.template_fields)


# -- the plan ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "expected"), [
    (dict(full_done=False), ["full_phase"]),
    (dict(consumed=False), ["incremental_phase"]),
    (dict(), ["wait_consume_point"]),                                   # a first run, already consumed
    (dict(try_number=2), ["rebuild_prepare"]),                           # cleared: rebuild
    (dict(run_type="backfill"), ["rebuild_prepare"]),
    (dict(try_number=2, consumed=False), ["incremental_phase"]),         # not consumed yet: the phase does it
    (dict(stream_start_ns=TUNNEL_AFTER, consumed=False), ["incremental_phase", "rebuild_prepare"]),
    (dict(stream_start_ns=TUNNEL_AFTER, full_done=False), ["full_phase", "rebuild_prepare"]),
    (dict(try_number=2, sink_type="tablestore"), ["wait_consume_point"]),  # a logged no-op
    (dict(try_number=2, start=H - timedelta(minutes=50)), ["wait_consume_point"]),  # not whole hours
    (dict(try_number=2, start=None, end=None), ["wait_consume_point"]),  # no logical date: no interval
])
def test_plan_branches(case: dict[str, Any], expected: list[str]) -> None:
    class Progress:
        done = case.pop("consumed", True)
        message = "consume point ..."

    args: dict[str, Any] = dict(full_done=True, progress=Progress(), sink_type="parquet",
                                start=H - timedelta(hours=1), end=H, try_number=1, run_type="scheduled",
                                stream_start_ns=TUNNEL_BEFORE, **TASK_IDS)
    args.update(case)
    branches, reason = plan_branches(**args)
    assert branches == expected
    if args["sink_type"] == "tablestore" and args["try_number"] > 1:
        assert "nothing to redo for the Tablestore sink" in reason


def test_a_first_run_of_the_tablestore_sink_says_the_full_phase_covers_its_interval() -> None:
    progress = SimpleNamespace(done=False, message="base data not consumed yet")
    branches, reason = plan_branches(full_done=False, progress=progress, sink_type="tablestore",
                                     start=H - timedelta(hours=1), end=H, try_number=1, run_type="scheduled",
                                     stream_start_ns=TUNNEL_AFTER, **TASK_IDS)
    assert branches == ["full_phase"]
    assert "nothing to redo" not in reason and "the full phase copies the table" in reason


def test_plan_branches_names_the_callers_tasks() -> None:
    progress = SimpleNamespace(done=False, message="behind")
    branches, _ = plan_branches(full_done=True, progress=progress, sink_type="parquet",
                                start=H - timedelta(hours=1), end=H, try_number=1, run_type="scheduled",
                                stream_start_ns=TUNNEL_AFTER, **(TASK_IDS | {"incremental_phase_task_id": "stream",
                                                                             "rebuild_task_id": "redo"}))
    assert branches == ["stream", "redo"]
    with pytest.raises(TypeError, match="wait_task_id"):  # no default task names: the caller's DAG names them
        plan_branches(full_done=True, progress=progress, sink_type="parquet", start=None, end=None,
                      try_number=1, run_type="manual", stream_start_ns=0, full_phase_task_id="a",
                      incremental_phase_task_id="b", rebuild_task_id="c")
    day = H.replace(hour=0)
    consumed = SimpleNamespace(done=True, message="")
    _, reason = plan_branches(full_done=True, progress=consumed, sink_type="parquet",
                              start=day - timedelta(hours=1), end=day, try_number=2, run_type="scheduled",
                              stream_start_ns=TUNNEL_BEFORE, partition_by="day", **TASK_IDS)
    assert "not on day boundaries" in reason


def test_plan_operator_reads_the_tunnel(tablestore_airflow_conn: str, stream_table: str,
                                        tablestore_tunnel_client: Any) -> None:
    tablestore_tunnel_client.create_tunnel(stream_table, "replication")
    plan = TablestoreReplicationPlanOperator(task_id=unique("plan"), table_name=stream_table,
                                             tunnel_name="replication", sink_type="parquet",
                                             tablestore_conn_id=tablestore_airflow_conn, **TASK_IDS)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    pushed: dict[tuple[str, str], Any] = {}
    assert plan.choose_branch(_context(run_after=now, xcom=pushed)) == ["full_phase"]  # base data is left
    # skipping the other branches ends the task before its return value is pushed: the plan is pushed first
    assert pushed == {("<this task>", "branches"): ["full_phase"]}
    # an interval that began before the tunnel: its partition is rebuilt too
    assert plan.choose_branch(_context(now - timedelta(hours=1), now)) == ["full_phase", "rebuild_prepare"]
    missing = TablestoreReplicationPlanOperator(task_id=unique("plan"), table_name=stream_table,
                                                tunnel_name="missing", sink_type="parquet",
                                                tablestore_conn_id=tablestore_airflow_conn, **TASK_IDS)
    with pytest.raises(AirflowFailException, match="'missing' .* does not exist"):  # a missing tunnel: no retries
        missing.choose_branch(_context(now - timedelta(hours=1), now))


@pytest.mark.parametrize("with_interval", [True, False])
def test_cutoff_renders_with_and_without_a_logical_date(with_interval: bool) -> None:
    """Runs triggered with "logical_date": null have no data interval: the cutoff falls back to run_after."""
    import jinja2

    run_after = datetime(2026, 11, 23, 12, 30, tzinfo=UTC)
    interval_end = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    context: dict[str, object] = {"dag_run": SimpleNamespace(run_after=run_after)}
    if with_interval:
        context["data_interval_end"] = interval_end
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)  # what Airflow renders with
    rendered = env.from_string(RUN_CUTOFF).render(**context)
    assert rendered == (interval_end if with_interval else run_after).isoformat()


def test_consumer_arguments_leave_out_what_is_not_given_and_end_with_the_cutoff() -> None:
    args = consumer_arguments(table="src", tunnel="t", phase="incremental", sink="parquet", sink_path="/log",
                              records_per_channel=500, partition_by="hour",
                              cutoff="2026-11-23T12:00:00+00:00")
    assert args == ["--table", "src", "--tunnel", "t", "--phase", "incremental", "--sink", "parquet",
                    "--sink-path", "/log", "--records-per-channel", "500", "--partition-by", "hour",
                    "--cutoff", "2026-11-23T12:00:00+00:00"]


# -- the rebuild -------------------------------------------------------------------------------------


def test_rerun_outside_the_stream_retention_is_refused() -> None:
    now = datetime(2026, 11, 23, 13, 30, tzinfo=UTC)
    assert outside_retention(now - timedelta(hours=5), now - timedelta(hours=4), 24, now) is None
    problem = outside_retention(now - timedelta(hours=30), now - timedelta(hours=29), 24, now)
    assert problem is not None and "retention 24 h" in problem and "left as it was" in problem


def _prepare(table: str, conn: str, parquet_path: str = "/nonexistent/log/") -> TablestoreCreateRebuildTunnelOperator:
    return TablestoreCreateRebuildTunnelOperator(task_id="rebuild_prepare", table_name=table,
                                                 tunnel_name="replication", parquet_path=parquet_path,
                                                 plan_task_id="plan", tablestore_conn_id=conn)


def test_rebuild_tunnel_is_bounded_to_the_interval_and_recreated_with_an_empty_staging_log(
        tablestore_airflow_conn: str, stream_table: str, tablestore_tunnel_client: Any, tmp_path: Path) -> None:
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=1)
    context = _context(start, end, xcom={("plan", "branches"): ["incremental_phase", "rebuild_prepare"]})
    prepared = _prepare(stream_table, tablestore_airflow_conn, f"{tmp_path}/log/").execute(context)
    stamp = f"{start:%Y%m%dT%H%M%S}"
    staging = tmp_path / "log" / "_rebuild" / stamp
    assert prepared == {"tunnel": f"replication-rebuild-{stamp}", "staging": str(staging)}
    assert [p.name for p in staging.iterdir()] == [REBUILD_PENDING]  # not swapped in yet, even if left empty
    tunnel = tablestore_tunnel_client.describe_tunnel(stream_table, prepared["tunnel"]).tunnel
    assert tunnel.tunnel_type == TunnelType.STREAM
    first_id = tunnel.tunnel_id
    # an earlier attempt's tunnel, and what its consumer staged: the new tunnel reads the interval again
    (staging / "interval=x" / "channel=c").mkdir(parents=True)
    (staging / "interval=x" / "channel=c" / "part-1.parquet").write_bytes(b"read by the first tunnel")
    again = _prepare(stream_table, tablestore_airflow_conn, f"{tmp_path}/log/").execute(context)
    assert again == prepared
    recreated = tablestore_tunnel_client.describe_tunnel(stream_table, prepared["tunnel"]).tunnel
    assert recreated.tunnel_id != first_id
    assert [p.name for p in staging.iterdir()] == [REBUILD_PENDING]  # no duplicate of the first tunnel's reads


def test_rebuild_skips_itself_unless_planned_and_refuses_what_the_stream_no_longer_holds(
        tablestore_airflow_conn: str, stream_table: str, tablestore_tunnel_client: Any) -> None:
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with pytest.raises(AirflowSkipException, match="plan did not choose a rebuild"):
        _prepare(stream_table, tablestore_airflow_conn).execute(
            _context(end - timedelta(hours=1), end, xcom={("plan", "branches"): ["incremental_phase"]}))
    old = end - timedelta(hours=30)  # the table's stream keeps 24 hours
    with pytest.raises(AirflowFailException, match="retention 24 h"):
        _prepare(stream_table, tablestore_airflow_conn).execute(
            _context(old - timedelta(hours=1), old, xcom={("plan", "branches"): ["rebuild_prepare"]}))
    assert tablestore_tunnel_client.list_tunnels(stream_table) == []  # nothing changed


def _staged_rebuild(tmp_path: Path, start: datetime) -> tuple[Path, Path]:
    """A change log with an old partition of ``start``'s hour, and a prepared staging log holding its rebuild."""
    log, staging = tmp_path / "log", tmp_path / "log" / "_rebuild" / f"{start:%Y%m%dT%H%M%S}"
    (log / f"interval={start:%Y%m%dT%H}").mkdir(parents=True)
    (log / f"interval={start:%Y%m%dT%H}" / "stray.parquet").write_bytes(b"old")
    prepare_rebuild(str(staging))
    (staging / f"interval={start:%Y%m%dT%H}").mkdir()
    (staging / f"interval={start:%Y%m%dT%H}" / "part.parquet").write_bytes(b"new")
    return log, staging


def _swap(table: str, conn: str, log: Path, staging: Path) -> TablestoreSwapRebuiltPartitionsOperator:
    return TablestoreSwapRebuiltPartitionsOperator(task_id=unique("swap"), table_name=table,
                                                   tunnel_name="replication-rebuild", parquet_path=str(log),
                                                   staging_path=str(staging), tablestore_conn_id=conn)


def test_swap_replaces_the_interval_partitions_and_deletes_the_tunnel(
        tablestore_airflow_conn: str, stream_table: str, tablestore_tunnel_client: Any,
        tmp_path: Path) -> None:
    start = H - timedelta(hours=1)
    log, staging = _staged_rebuild(tmp_path, start)
    (log / "interval=20261123T11").mkdir()
    tablestore_tunnel_client.create_tunnel(stream_table, "replication-rebuild", TunnelType.STREAM)
    swap = _swap(stream_table, tablestore_airflow_conn, log, staging)
    assert swap.execute(_context(start, H)) == ["20261123T12"]
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["part.parquet"]
    assert (log / "interval=20261123T11").is_dir() and not staging.exists()
    assert tablestore_tunnel_client.list_tunnels(stream_table) == []


def test_a_retried_swap_keeps_the_rebuilt_partition(tablestore_airflow_conn: str, stream_table: str,
                                                    tablestore_tunnel_client: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt swaps the partitions in, then fails to delete the tunnel; the retry must not swap in
    the (now absent) staging log as "an interval without changes", and deletes the tunnel."""
    from airflow_tablestore.client.errors import ServerError
    from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

    start = H - timedelta(hours=1)
    log, staging = _staged_rebuild(tmp_path, start)
    tablestore_tunnel_client.create_tunnel(stream_table, "replication-rebuild", TunnelType.STREAM)
    with monkeypatch.context() as patched:
        def unavailable(self: Any, table_name: str, tunnel_name: str) -> bool:
            raise ServerError("OTSServerUnavailable", "the service is unavailable", 503)

        patched.setattr(TablestoreTunnelHook, "delete_tunnel", unavailable)
        with pytest.raises(ServerError):
            _swap(stream_table, tablestore_airflow_conn, log, staging).execute(_context(start, H))
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["part.parquet"]
    assert [t.tunnel_name for t in tablestore_tunnel_client.list_tunnels(stream_table)] == ["replication-rebuild"]
    assert _swap(stream_table, tablestore_airflow_conn, log, staging).execute(_context(start, H)) == ["20261123T12"]
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["part.parquet"]  # survived the retry
    assert tablestore_tunnel_client.list_tunnels(stream_table) == []
    # a third run (the tunnel already gone) changes nothing either
    assert _swap(stream_table, tablestore_airflow_conn, log, staging).execute(_context(start, H)) == ["20261123T12"]
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["part.parquet"]


def test_a_rebuild_that_found_no_changes_empties_the_partition(
        tablestore_airflow_conn: str, stream_table: str, tmp_path: Path) -> None:
    start = H - timedelta(hours=1)
    log, staging = tmp_path / "log", tmp_path / "log" / "_rebuild" / "x"
    (log / "interval=20261123T12").mkdir(parents=True)
    (log / "interval=20261123T12" / "stray.parquet").write_bytes(b"old")
    prepare_rebuild(str(staging))  # the rebuild then wrote nothing
    assert _swap(stream_table, tablestore_airflow_conn, log, staging).execute(_context(start, H)) == ["20261123T12"]
    assert list((log / "interval=20261123T12").iterdir()) == []


# -- the announcement --------------------------------------------------------------------------------


def _announce(**kwargs: Any) -> TablestoreAnnounceReplicationOperator:
    return TablestoreAnnounceReplicationOperator(task_id=unique("announce"), destination_table="replica",
                                                 phase_task_ids=["full_phase", "incremental_phase"], **kwargs)


def test_announce_the_destination_table(tablestore_airflow_conn: str) -> None:
    op = _announce(sink_type="tablestore", parquet_path=None, sink_tablestore_conn_id=tablestore_airflow_conn)
    assert [o.name for o in op.outlets] == ["tablestore_replication"]
    summaries = {"full_phase": {"records": 10, "consume_point": None},
                 "incremental_phase": {"records": 5, "consume_point": "2026-11-23T12:59:59+00:00"}}
    context = _context(H - timedelta(hours=1), H,
                       xcom={(task_id, "return_value"): value for task_id, value in summaries.items()})
    result = op.execute(context)
    assert result == {"assets": ["tablestore://emulator/replica"],
                      "interval_start": "2026-11-23T12:00:00+00:00",
                      "interval_end": "2026-11-23T13:00:00+00:00", "records": 15,
                      "replicated_through": "2026-11-23T12:59:59+00:00"}
    [(asset, extra)] = context["events"]["tablestore_replication"]
    assert asset.uri == "tablestore://emulator/replica" and extra["records"] == 15


def test_announce_the_interval_partitions(tmp_path: Path) -> None:
    op = _announce(sink_type="parquet", parquet_path=f"{tmp_path}/log/", asset_alias="changes")
    context = _context(H - timedelta(hours=2), H)  # the phases were skipped: no summaries
    result = op.execute(context)
    assert result["assets"] == [f"file://{tmp_path}/log/interval=20261123T11",
                                f"file://{tmp_path}/log/interval=20261123T12"]
    assert result["records"] == 0 and result["replicated_through"] is None
    assert len(context["events"]["changes"]) == 2
    no_interval = op.execute(_context(run_after=H))  # a run without a logical date: the whole change log
    assert no_interval["assets"] == [f"file://{tmp_path}/log"] and no_interval["interval_start"] is None
