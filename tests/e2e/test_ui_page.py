"""The Tablestore page in a real browser: headless Chromium (Debian package) driven by Playwright, against
Airflow's real api-server with the provider installed (the plugin found through its entry point, nothing in
``plugins/``), a real emulator and runs recorded by ``airflow dags test`` (slow).

What it shows: the page in the navigation (Browse > Tablestore), the tunnel and channels a replication run
created, the history charts drawn, a channel held by a dead client flagged as stuck, a connection that fails
shown in its own row, and the refusals: no login (401), a user without the permission to read connections
(403). No secret in the page, its JSON or the api-server's log. Screenshots go to ``tests/artifacts/ui/``.

``make test-compat`` runs this module against the built wheel (tests/compat/test_ui_from_wheel.py, with
``TABLESTORE_BROWSER`` and ``TABLESTORE_UI_INSTALLED`` set); ``make test`` runs only its api-server checks (the
refusals, no secret in the JSON), which need no replication runs and no browser.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from airflow_helpers import simple_schema

import airflow_tablestore
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.airflow_components import Airflow, components_env, free_port

pytestmark = pytest.mark.slow
# The replication runs and the browser: `make test-compat` (against the wheel), or TABLESTORE_BROWSER=1 by hand
needs_browser = pytest.mark.skipif(not os.environ.get("TABLESTORE_BROWSER"),
                                   reason="the browser test runs in make test-compat, against the built wheel")

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "ui"
CHROMIUM = os.environ.get("TABLESTORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PASSWORDS = {"admin": "admin-pass-e2e", "viewer": "viewer-pass-e2e"}
TABLE, STUCK_TABLE, IDLE_TABLE = "ui_orders", "ui_payments", "ui_customers"
RUNS = 3

DAGS = '''
from datetime import datetime

from airflow.sdk import DAG

from airflow_tablestore.operators.consume import TablestoreTunnelConsumeOperator
from airflow_tablestore.operators.replication import RUN_CUTOFF
from airflow_tablestore.operators.tunnel import TablestoreCreateTunnelOperator


def keep(records):
    """The replica: records handed over are done."""


with DAG("ui_replication", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={"table": "%(table)s", "tunnel": "replication"}):
    TablestoreCreateTunnelOperator(task_id="create_tunnel", table_name="{{ params.table }}",
                                   tunnel_name="{{ params.tunnel }}", tunnel_type="BaseAndStream") >> \\
        TablestoreTunnelConsumeOperator(task_id="consume", table_name="{{ params.table }}",
                                        tunnel_name="{{ params.tunnel }}", apply_function=keep,
                                        cutoff=RUN_CUTOFF, max_seconds=90, heartbeat_interval=1)

with DAG("ui_payments_consumer", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    TablestoreTunnelConsumeOperator(task_id="consume", table_name="%(stuck)s", tunnel_name="held",
                                    apply_function=keep, max_records=1)
'''


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--stream-partitions", "2"]) as emu:
        yield emu


@pytest.fixture(scope="module")
def airflow(tablestore_emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    """The api-server alone over a migrated database, its two connections and the tables (no runs yet)."""
    emulator = tablestore_emulator
    with TableClient(**emulator.client_kwargs) as tables:
        for name in (TABLE, STUCK_TABLE, IDLE_TABLE):
            tables.create_table(simple_schema(name))
        for i in range(40):
            tables.put_row(TABLE, [("id", f"o{i}"), ("seq", i)], [("amount", i)])
    home = tmp_path_factory.mktemp("airflow-ui")
    dags = home / "dags"
    dags.mkdir()
    (dags / "ui_dags.py").write_text(DAGS % {"table": TABLE, "stuck": STUCK_TABLE})
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    port = free_port()
    env = components_env(home, emulator, dags, port)
    closed = free_port()  # nothing listens there: the connection that fails
    env.update({
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        # as in a deployment, not the source checkout's root on sys.path: its egg-info would make Airflow find
        # the package's plugin entry point twice (and report the copy as a plugin import error)
        "PYTHONSAFEPATH": "1",
    })
    af = Airflow(env, home, port, "ui_replication")
    try:
        af.start_api_server()
        # stored in the metadata database (the emulator's connection is an AIRFLOW_CONN_* variable)
        af.cli("connections", "add", "tablestore_broken", "--conn-json", json.dumps({
            "conn_type": "tablestore", "host": f"http://127.0.0.1:{closed}", "login": "LTAIbroken",
            "password": "broken-secret-e2e", "extra": {"instance_name": "gone"}}))
        yield af
    finally:
        af.stop()
        shutil.copy(home / "api-server.log", _artifacts() / "api-server.log")


@pytest.fixture(scope="module")
def replicated(airflow: Airflow, tablestore_emulator: EmulatorProcess) -> Airflow:
    """The api-server after a replication that ran (tunnel created, channels consumed, summaries in XCom) and a
    consumer that died holding its channels."""
    emulator = tablestore_emulator
    airflow.cli("dags", "reserialize", timeout=300)
    for i in range(RUNS):
        with TableClient(**emulator.client_kwargs) as tables:
            for j in range(10 * (i + 1)):
                tables.put_row(TABLE, [("id", f"r{i}-{j}"), ("seq", j)], [("amount", j)])
        airflow.cli("dags", "test", "ui_replication", timeout=300)
    with TunnelClient(**emulator.client_kwargs) as tunnels:
        tunnel_id = tunnels.create_tunnel(STUCK_TABLE, "held")
        holder = tunnels.connect(tunnel_id, timeout_s=3600, client_tag="crashed-consumer")
        tunnels.heartbeat(tunnel_id, holder, [])
    return airflow


def _artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def _token(af: Airflow, user: str) -> str:
    response = requests.post(f"http://127.0.0.1:{af.port}/auth/token",
                             json={"username": user, "password": PASSWORDS[user]}, timeout=30)
    assert response.status_code == 201, response.text
    return str(response.json()["access_token"])


def test_the_api_server_runs_the_package_under_test(airflow: Airflow) -> None:
    """The api-server's interpreter, environment and directory import the package this test imports; with
    TABLESTORE_UI_INSTALLED (make test-compat) that is the wheel installed in that venv, not the checkout."""
    served = subprocess.run([sys.executable, "-c", "import airflow_tablestore; print(airflow_tablestore.__file__)"],
                            env=airflow.env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert served == airflow_tablestore.__file__
    installed = os.environ.get("TABLESTORE_UI_INSTALLED")
    if installed:
        assert Path(served).is_relative_to(installed), served
        assert "site-packages" in Path(served).parts, served


def test_the_page_refuses_who_may_not_read_connections(airflow: Airflow) -> None:
    base = f"http://127.0.0.1:{airflow.port}/tablestore"
    for path in ("/", "/api/overview"):
        assert requests.get(base + path, timeout=30).status_code == 401  # no token, no cookie
        assert requests.get(base + path, headers={"Authorization": "Bearer not-a-token"},
                            timeout=30).status_code in (401, 403)
        viewer = {"Authorization": f"Bearer {_token(airflow, 'viewer')}"}  # may read DAGs, not connections
        assert requests.get(base + path, headers=viewer, timeout=30).status_code == 403
        assert requests.get(base + path, cookies={"_token": _token(airflow, "viewer")}, timeout=30).status_code == 403
    admin = {"Authorization": f"Bearer {_token(airflow, 'admin')}"}
    assert requests.post(base + "/", headers=admin, timeout=30).status_code == 405  # read-only


@needs_browser
def test_the_overview_lists_tunnels_channels_consumers_and_history(replicated: Airflow) -> None:
    airflow = replicated
    admin = {"Authorization": f"Bearer {_token(airflow, 'admin')}"}
    response = requests.get(f"http://127.0.0.1:{airflow.port}/tablestore/api/overview", headers=admin, timeout=60)
    assert response.ok, response.text
    data = response.json()
    conns = {c["conn_id"]: c for c in data["connections"]}
    assert set(conns) == {"tablestore_default", "tablestore_broken"}
    broken = conns["tablestore_broken"]  # read from the metadata database: it got as far as calling the endpoint
    assert "OTSNetworkError" in broken["error"] and broken["instance"] == "gone" and not broken["tunnels"]
    default = conns["tablestore_default"]
    assert default["error"] is None
    assert {TABLE, STUCK_TABLE, IDLE_TABLE} <= set(default["stream_tables"])
    tunnels = {t["tunnel"]: t for t in default["tunnels"]}
    replication, held = tunnels["replication"], tunnels["held"]
    assert (replication["table"], replication["type"], replication["dags"]) == (TABLE, "BaseAndStream",
                                                                                ["ui_replication"])
    assert replication["channels"] and all(c["stuck"] is None for c in replication["channels"])
    assert any(c["lag_s"] is not None for c in replication["channels"])
    assert held["dags"] == ["ui_payments_consumer"]
    assert held["channels"] and all("held by client crashed-consumer" in (c["stuck"] or "")
                                    for c in held["channels"] if c["status"] == "OPEN")
    assert any(c["stuck"] for c in held["channels"])
    # requests per view: ListTable + ListTunnel + DescribeTunnel per tunnel + DescribeTable per table without one
    assert default["requests"] == 2 + len(default["tunnels"]) + 1
    history = {d["dag_id"]: d for d in data["dags"]}
    runs = history["ui_replication"]["runs"]
    assert len(runs) == RUNS and all(r["state"] == "success" for r in runs)
    assert sum(r["records"] for r in runs) >= 40 + 10 + 20 + 30
    assert all(r["duration_s"] > 0 and r["lag_s"] is not None for r in runs)
    assert history["ui_payments_consumer"]["runs"] == []


@needs_browser
def test_the_page_in_a_browser(replicated: Airflow) -> None:
    airflow = replicated
    from playwright import sync_api  # the test extra; the browser is Debian's Chromium (make browser)

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make browser` installs Debian's chromium"
    base = f"http://127.0.0.1:{airflow.port}"
    out = _artifacts()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            anonymous = browser.new_page()
            refused = anonymous.goto(f"{base}/tablestore/")
            assert refused is not None and refused.status == 401
            assert "Tablestore requests" not in anonymous.content()

            page = browser.new_page(viewport={"width": 1440, "height": 1640})
            page.goto(f"{base}/")
            page.get_by_label("Username").fill("admin")  # Airflow's own login form
            page.get_by_label("Password").fill(PASSWORDS["admin"])
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="Browse").click()
            page.get_by_role("menuitem", name="Tablestore").click()
            page.wait_for_url("**/tablestore")
            frame = page.frame_locator("iframe")
            held = frame.locator('section[data-conn="tablestore_default"] tr.channel.stuck')
            held.first.wait_for(timeout=60_000)
            assert "held by client crashed-consumer" in held.first.inner_text()
            tunnel = frame.locator('tr.tunnel[data-tunnel="replication"]')
            assert "BaseAndStream" in tunnel.inner_text() and "ui_replication" in tunnel.inner_text()
            assert frame.locator('section[data-conn="tablestore_broken"] .error').count() == 1
            charts = frame.locator('section[data-dag="ui_replication"] svg.chart')
            assert charts.count() == 3
            bars = frame.locator('section[data-dag="ui_replication"] svg.chart rect.bar')
            assert bars.count() == 3 * RUNS
            box = bars.first.bounding_box()
            assert box is not None and box["height"] > 0 and box["width"] > 0  # drawn, not just in the markup
            page.screenshot(path=str(out / "tablestore-page.png"), full_page=False)
            assert page.evaluate("fetch('/api/v2/plugins/importErrors').then(r => r.json())")["total_entries"] == 0
            inner = browser.new_page(viewport={"width": 1280, "height": 900},
                                     extra_http_headers={"Authorization": f"Bearer {_token(airflow, 'admin')}"})
            inner.goto(f"{base}/tablestore/")
            inner.screenshot(path=str(out / "tablestore-page-content.png"), full_page=True)
            html = inner.content()
        finally:
            browser.close()
    log = (airflow.home / "api-server.log").read_text(errors="replace")
    for secret in (_emulator_secret(airflow), "broken-secret-e2e", *PASSWORDS.values()):
        assert secret not in html
        assert secret not in log


def _emulator_secret(af: Airflow) -> str:
    return str(json.loads(af.env["AIRFLOW_CONN_TABLESTORE_DEFAULT"])["password"])


def test_no_secret_in_the_json(airflow: Airflow) -> None:
    admin = {"Authorization": f"Bearer {_token(airflow, 'admin')}"}
    text = requests.get(f"http://127.0.0.1:{airflow.port}/tablestore/api/overview", headers=admin, timeout=60).text
    assert '"connections"' in text
    for value in (_emulator_secret(airflow), "broken-secret-e2e", "LTAIbroken"):
        assert value not in text
