"""``TablestoreTunnelChangesTrigger`` in an ``AssetWatcher`` under a real Airflow: api-server, scheduler,
dag-processor and triggerer as separate processes (``airflow_components``), the DAG file exactly as
docs/airflow.md shows it (smaller thresholds, the emulator's instance).

The emulator's ``orders`` table has the ``orders_changes`` Stream tunnel, which nobody consumes. The test

1. writes a burst of changes before the triggerer starts: its first poll sees them all, so one asset event (and
   one DAG run, whose task returns the event's payload) says ``min_records`` with every change counted;
2. writes two changes: fewer than ``min_records``, they fire once the oldest waited ``max_delay``;
3. SIGKILLs the triggerer, writes more changes, starts another triggerer: the restarted trigger counts from the
   consume point again, so an event reports every unconsumed change, the new ones included (none lost).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from airflow_helpers import simple_schema

from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.airflow_components import Airflow, components_env, free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DAG_ID = "orders_on_changes"
TABLE, TUNNEL = "orders", "orders_changes"
BURST, MIN_RECORDS, MAX_DELAY = 60, 20, 4


def documented_dag(instance: str) -> str:
    """The DAG file of docs/airflow.md ("Event-driven scheduling") with the test's thresholds and instance."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "airflow.md").read_text(), re.S)
    (source,) = [b for b in blocks if "TablestoreTunnelChangesTrigger(" in b and "@dag" in b]
    for old, new in (("min_records=1000, max_delay=300, poll_interval=30",
                      f"min_records={MIN_RECORDS}, max_delay={MAX_DELAY}, poll_interval=1"),
                     ("tablestore://myinst/orders", f"tablestore://{instance}/orders")):
        assert old in source, old
        source = source.replace(old, new)
    return source


def write(client: TableClient, keys: range) -> int:
    """Put one row per key; the time (ns) after the last write."""
    for i in keys:
        client.put_row(TABLE, (("id", f"k{i}"), ("seq", i)), [("v", i)])
    return time.time_ns()


def payloads(airflow: Airflow) -> list[dict[str, Any]]:
    """The trigger's asset events, oldest first."""
    assets = airflow.get("/assets", uri_pattern="tablestore").get("assets", [])
    if not assets:
        return []
    events = airflow.get("/assets/events", asset_id=assets[0]["id"], order_by="timestamp", limit=100)
    return [e["extra"]["payload"] for e in events.get("asset_events", []) if e["extra"].get("from_trigger")]


def test_watcher_batches_changes_and_loses_none_across_a_triggerer_kill(
    tablestore_emulator: EmulatorProcess, tmp_path: Path
) -> None:
    emulator = tablestore_emulator
    client = TableClient(**emulator.client_kwargs)
    client.create_table(simple_schema(TABLE))
    with TunnelClient(**emulator.client_kwargs) as tunnels:
        tunnels.create_tunnel(TABLE, TUNNEL, TunnelType.STREAM)
    burst_end = write(client, range(BURST))  # 1. before Airflow starts: the first poll sees the whole burst

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "orders_on_changes.py").write_text(documented_dag(emulator.instance))
    home = tmp_path / "airflow"
    port = free_port()
    env = components_env(home, emulator, dags, port)
    env.update({
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # an asset's watchers run for unpaused DAGs only
        # a restarted triggerer takes over the dead one's triggers once its heartbeat is this old
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
    })
    airflow = Airflow(env, home, port, DAG_ID)
    airflow.start()
    try:
        airflow.wait(lambda: len(payloads(airflow)) >= 1, 120, "the burst's asset event")
        time.sleep(3)  # a few more polls: still one event for the burst
        (burst,) = payloads(airflow)
        assert burst["reason"] == "min_records" and burst["records"] == BURST, burst
        assert burst["table_name"] == TABLE and burst["tunnel_name"] == TUNNEL and burst["caught_up"]
        assert burst["last_change_ns"] <= burst_end
        runs = airflow.wait_runs_done(timeout=180)
        assert [r["state"] for r in runs] == ["success"], runs
        returned = airflow.get(f"/dags/{DAG_ID}/dagRuns/{runs[0]['dag_run_id']}/taskInstances/consume/"
                               "xcomEntries/return_value").get("value")
        assert returned == [burst] or (isinstance(returned, str) and str(BURST) in returned), returned

        # 2. a quiet table: two changes fire once the oldest waited max_delay
        quiet_end = write(client, range(1000, 1002))
        airflow.wait(lambda: len(payloads(airflow)) >= 2, 60, "the quiet changes' asset event")
        quiet = payloads(airflow)[1]
        assert quiet["reason"] == "max_delay" and quiet["records"] == 2, quiet
        assert burst_end < quiet["first_change_ns"] <= quiet["last_change_ns"] <= quiet_end

        # 3. changes written while the triggerer is dead are reported after its restart
        airflow.kill_triggerer()
        before = len(payloads(airflow))
        late_end = write(client, range(2000, 2005))
        airflow.start_triggerer()
        airflow.wait(lambda: len(payloads(airflow)) > before, 120, "an event after the triggerer's restart")
        late = payloads(airflow)[before]
        # nobody consumed the tunnel: everything since its consume point is reported again, the late ones too
        assert late["records"] == BURST + 2 + 5 and late["reason"] == "min_records", late
        assert late["last_change_ns"] > quiet["last_change_ns"] and late["last_change_ns"] <= late_end
        airflow.wait(lambda: len(airflow.runs()) >= 3 and all(r["state"] == "success" for r in airflow.runs()),
                     180, "the runs of the events")
    finally:
        airflow.stop()
