"""The replication DAG under a real Airflow (issue 12, item 8): api-server, scheduler, dag-processor and
triggerer as separate processes with the LocalExecutor on PostgreSQL (a throwaway cluster: ``airflow backfill
create`` while the scheduler runs is not reliable on SQLite), driven through the public REST API as the UI does.

The emulator's clock starts four hours back so that the source's history spans past hourly intervals: base rows
are loaded in the first, changes are written in each of the next three, then the clock catches up with real
time. The test then

1. unpauses the DAG (catchup off: the scheduler creates only the latest interval's run) and triggers a run with
   parameters and without a logical date (Parquet change log, full phase, replicated through ``run_after``),
2. triggers a run with a logical date,
3. runs ``airflow backfill create`` over three past intervals with its defaults (10 active runs): each is a rerun
   of an interval the tunnel already passed, so each rebuilds its partition through a bounded Stream tunnel
   (as does the scheduled run, whose interval began before the tunnel),
4. clears one of those intervals (after planting a stray file in its partition) and lets it rebuild again,
5. runs a small DAG whose deferrable consume-point sensor waits in the triggerer for a cutoff a running
   replication passes,

and checks: every run succeeded with no task retried, the Spark tasks of different runs never overlapped, each
past interval's partition holds exactly the changes committed in it, the cleared interval was rebuilt (the
stray file is gone), and the sensor resumed through the triggerer.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import snapshot, stream_changes, write_key

from airflow_tablestore.client.model import RowWrite
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.sinks.parquet import read_change_log
from demo import replication as demo
from testing.airflow_components import Airflow, components_env, free_port, hour_with_room

from .postgres import PostgresCluster

pytestmark = pytest.mark.slow
DAG_ID = "tablestore_replication"
ROWS = 300
# The packaged DAG with this test's defaults (scheduled runs take no conf), built as a user does it
REPLICATION_DAG = textwrap.dedent('''
    from airflow_tablestore.example_dags.tablestore_replication import replication_dag

    dag = replication_dag(source_table="orders", sink_type="parquet", parquet_path={path!r},
                          records_per_channel=500, heartbeat_interval=1)
''')
SENSOR_DAG = textwrap.dedent('''
    from datetime import timedelta
    from airflow.sdk import DAG
    from airflow_tablestore.sensors.tunnel import TablestoreTunnelConsumePointSensor

    with DAG("wait_for_replication", schedule=None, catchup=False, params={"table": "", "tunnel": ""}):
        TablestoreTunnelConsumePointSensor(
            task_id="wait", table_name="{{ params.table }}", tunnel_name="{{ params.tunnel }}",
            cutoff="{{ (dag_run.run_after + macros.timedelta(seconds=25)).isoformat() }}",
            poke_interval=2, timeout=600, deferrable=True)
''')


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[EmulatorProcess, dict[str, list[RowWrite]], datetime]]:
    """An emulator whose source table has base rows in hour H-4 and changes in H-3, H-2 and H-1 (by commit
    time), its clock then brought to real time. Yields the emulator, the writes per partition and H."""
    hour = hour_with_room(timedelta(minutes=4))  # Airflow's start-up before the unpause: a minute or two
    start = hour - timedelta(hours=4) + timedelta(minutes=5)
    with EmulatorProcess(data_dir=tmp_path / "emulator", extra_args=[
            "--clock-start", start.isoformat(), "--stream-partitions", "2", "--base-channel-rows", "200"]) as emu:
        client = TableClient(**emu.client_kwargs)
        control = emu.control
        demo.create_source_table(client, "orders")
        base = list(demo.initial_writes("orders", ROWS))
        demo.apply_writes(client, base)  # with the stream on: these are the changes of hour H-4 too
        writes: dict[str, list[RowWrite]] = {(hour - timedelta(hours=4)).strftime("%Y%m%dT%H"): base}
        gone: set[int] = set()
        for back in (3, 2, 1):
            control.set_time((hour - timedelta(hours=back) + timedelta(minutes=10)).timestamp())
            batch = demo.change_writes("orders", ROWS, 40, offset=back, gone=gone)
            demo.apply_writes(client, batch)
            writes[(hour - timedelta(hours=back)).strftime("%Y%m%dT%H")] = batch
        control.set_time(datetime.now(UTC).timestamp())
        yield emu, writes, hour


@pytest.mark.timeout(1200)  # about 6 minutes on a quiet machine; Spark and Airflow slow down a lot under load
def test_dag_under_a_real_scheduler(history: tuple[EmulatorProcess, dict[str, list[RowWrite]], datetime],
                                    tmp_path: Path) -> None:
    emulator, writes, hour = history
    client = TableClient(**emulator.client_kwargs)
    dags = tmp_path / "dags"
    dags.mkdir()
    path = str(tmp_path / "changelog")
    (dags / "tablestore_replication.py").write_text(REPLICATION_DAG.format(path=path))
    (dags / "wait_for_replication.py").write_text(SENSOR_DAG)
    home = tmp_path / "airflow"
    port = free_port()
    postgres = PostgresCluster().start()
    env = components_env(home, emulator, dags, port, database_url=postgres.url)
    airflow = Airflow(env, home, port, DAG_ID)
    params = {"source_table": "orders", "tunnel_name": "replication", "sink_type": "parquet",
              "parquet_path": path, "records_per_channel": 500, "heartbeat_interval": 1}
    try:
        airflow.start()
        # 1. unpause (catchup off: no past runs are created) and trigger a run with parameters and without a
        #    logical date: the full phase, then the stream through run_after
        airflow.call("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        airflow.call("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": params})
        airflow.wait_runs_done()
        # 2. a run with a logical date (the trigger dialog's default: now)
        airflow.call("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": datetime.now(UTC).isoformat(),
                                                          "conf": params})
        airflow.wait_runs_done()
        # 3. backfill three past intervals with the CLI's defaults (10 active runs): the cron points H-3, H-2 and
        #    H-1 are the runs of [H-4, H-3), [H-3, H-2) and [H-2, H-1). (Unpausing made the scheduler create the
        #    run of the latest interval, [H-1, H), which began before the tunnel: it rebuilds its partition too.)
        airflow.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date",
                    (hour - timedelta(hours=3)).isoformat(), "--to-date", (hour - timedelta(hours=1)).isoformat(),
                    "--dag-run-conf", json.dumps(params))
        runs = airflow.wait_runs_done()
        backfills = sorted((r for r in runs if r["run_type"] == "backfill"), key=lambda r: r["logical_date"])
        assert len(backfills) == 3, [(r["dag_run_id"], r["run_type"], r["logical_date"], r["state"]) for r in runs]
        # 4. clear one past interval after planting a stray file in its partition
        cleared = backfills[1]
        stray = Path(path) / f"interval={(hour - timedelta(hours=3)).strftime('%Y%m%dT%H')}" / "stray.parquet"
        stray.write_bytes(Path(next(Path(path).glob("interval=*/channel=*/part-*.parquet"))).read_bytes())
        airflow.call("POST", f"/dags/{DAG_ID}/clearTaskInstances",
                     {"dag_run_id": cleared["dag_run_id"], "dry_run": False, "only_failed": False,
                      "reset_dag_runs": True})
        runs = airflow.wait_runs_done()
        # 5. a deferrable sensor in another DAG waits in the triggerer for a cutoff 25 s ahead, which a
        #    replication run with a later cutoff passes
        airflow.call("PATCH", "/dags/wait_for_replication", {"is_paused": False})
        airflow.call("POST", "/dags/wait_for_replication/dagRuns",
                     {"logical_date": None, "conf": {"table": "orders", "tunnel": "replication"}})
        airflow.wait(lambda: any(ti["state"] == "deferred" for r in airflow.runs("wait_for_replication")
                                 for ti in airflow.task_instances(r["dag_run_id"], "wait_for_replication")),
                     120, "the sensor to defer")
        time.sleep(30)
        airflow.call("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": params})
        sensor_runs = airflow.wait_runs_done("wait_for_replication")
        runs = airflow.wait_runs_done()
        tis = [ti for r in runs for ti in airflow.task_instances(r["dag_run_id"])]
        events = airflow.get("/assets/events", limit=100, order_by="-timestamp").get("asset_events", [])
    finally:
        airflow.stop()
        postgres.cleanup()

    assert len(runs) >= 6 and all(r["state"] == "success" for r in runs), runs
    # deferred (seen above), then resumed by the triggerer's event: success without a retry
    assert sensor_runs[0]["state"] == "success", sensor_runs
    retried = [(ti["dag_run_id"], ti["task_id"], ti["try_number"]) for ti in tis
               if ti["try_number"] > 1 and ti["dag_run_id"] != cleared["dag_run_id"]]
    assert retried == []
    assert_no_overlap(tis)
    for partition, batch in writes.items():  # exact partitions, the cleared one rebuilt again
        got = stream_changes(arrow_to_records(read_change_log(f"{path}/interval={partition}")))
        assert got == Counter(write_key(w) for w in batch), partition
    assert not stray.exists()
    # one Asset event per successful run, for its change-log partition, with the interval and the records
    partition_events = [e for e in events if "/interval=" in (e.get("uri") or "")]
    assert {e["uri"].rsplit("=", 1)[1] for e in partition_events} >= set(writes), events
    assert all({"interval_start", "interval_end", "records"} <= set(e["extra"] or {}) for e in partition_events), events
    assert snapshot(client, "orders")  # the source is still there (the emulator outlived the runs)


def assert_no_overlap(tis: list[dict[str, Any]]) -> None:
    """The Spark tasks of the main tunnel (full and incremental phase) never ran at the same time."""
    spans = sorted((ti["start_date"], ti["end_date"], ti["dag_run_id"], ti["task_id"]) for ti in tis
                   if ti["task_id"] in ("full_phase", "incremental_phase") and ti["start_date"] and ti["end_date"])
    for (_, end, run, task), (start, _, next_run, next_task) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{run}/{task} overlapped {next_run}/{next_task}"
