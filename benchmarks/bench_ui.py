"""The Tablestore page's cost: one view of 50 tunnels over 5 connections, through Airflow's real api-server.

Five emulator processes (one per connection, ``AIRFLOW_CONN_*`` variables), each with 10 stream tables and a
BaseAndStream tunnel on each; the api-server alone (migrated SQLite, no DAGs), an admin's token. Each view is a
GET of ``/tablestore/`` (the HTML page: service calls, metadata queries and rendering) timed from the client;
the JSON twin says how many Tablestore requests the view made. Then the same with ``--latency`` injected by every
emulator on every call (standing in for a network round trip), which the page's concurrency hides.

    .venv/bin/python -m benchmarks.bench_ui --views 10 --latency 0.05
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import requests

from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import ROOT
from testing.airflow_components import Airflow, components_env, free_port

CONNECTIONS, TUNNELS_EACH = 5, 10
PATHS = ("/ListTable", "/DescribeTable", "/tunnel/list", "/tunnel/describe")


def _views(af: Airflow, token: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        response = requests.get(f"http://127.0.0.1:{af.port}/tablestore/", timeout=60,
                                headers={"Authorization": f"Bearer {token}"})
        times.append(time.perf_counter() - started)
        assert response.ok and 'data-card="tunnels"' in response.text, response.text[:500]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--views", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each emulator holds every call")
    args = parser.parse_args()
    with ExitStack() as stack:
        emulators = [stack.enter_context(EmulatorProcess()) for _ in range(CONNECTIONS)]
        for emu in emulators:
            with TableClient(**emu.client_kwargs) as tables, TunnelClient(**emu.client_kwargs) as tunnels:
                for i in range(TUNNELS_EACH):
                    name = f"bench_{i}"
                    tables.create_table(TableSchema(name, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                                    stream=StreamSpec(enabled=True)))
                    tunnels.create_tunnel(name, f"tunnel_{i}")
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ui-")))
        (home / "dags").mkdir()
        (home / "passwords.json").write_text(json.dumps({"admin": "bench-admin"}))
        port = free_port()
        env = components_env(home, emulators[0], home / "dags", port)
        env.update({f"AIRFLOW_CONN_TABLESTORE_{i}": emu.airflow_connection_json() for i, emu in enumerate(emulators)})
        env.pop("AIRFLOW_CONN_TABLESTORE_DEFAULT")
        env.update({"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json")})
        af = Airflow(env, home, port, "none")
        stack.callback(af.stop)
        af.start_api_server()
        token = requests.post(f"http://127.0.0.1:{port}/auth/token", timeout=30,
                              json={"username": "admin", "password": "bench-admin"}).json()["access_token"]
        overview = requests.get(f"http://127.0.0.1:{port}/tablestore/api/overview", timeout=60,
                                headers={"Authorization": f"Bearer {token}"}).json()
        tunnels = sum(len(c["tunnels"]) for c in overview["connections"])
        channels = sum(len(t["channels"]) for c in overview["connections"] for t in c["tunnels"])
        per_conn = sorted({c["requests"] for c in overview["connections"]})
        assert tunnels == CONNECTIONS * TUNNELS_EACH and not any(c["error"] for c in overview["connections"])
        _views(af, token, 2)  # warm-up: the first view imports the page's modules
        plain = _views(af, token, args.views)
        for emu in emulators:
            for path in PATHS:
                emu.control.add_fault(path, code=None, delay_s=args.latency, count=1_000_000)
        slow = _views(af, token, args.views)
    rows = [("no injected latency", plain), (f"{args.latency * 1000:.0f} ms per call injected", slow)]
    table = "\n".join(f"| {label} | {statistics.median(t):.3f} s | {max(t):.3f} s |" for label, t in rows)
    load = os.getloadavg()[0]
    requests_per_view = sum(c["requests"] for c in overview["connections"])
    serial = (2 + TUNNELS_EACH) * CONNECTIONS
    text = f"""# The Tablestore page in Airflow's UI: one view of 50 tunnels over 5 connections

Command (2-core machine shared with other sessions, load average {load:.1f} at the end; Python 3.11, Airflow
3.3.2, five emulator processes, the api-server alone on SQLite):

```
.venv/bin/python -m benchmarks.bench_ui --views {args.views} --latency {args.latency}
```

{CONNECTIONS} connections, {tunnels} tunnels, {channels} channels; no DAG consumes them (the metadata part is a
few indexed queries). Each view is a GET of `/tablestore/` with an admin's token, timed by the client:
Tablestore calls, metadata queries and the HTML. {args.views} views per row after two warm-up views.

| Variant | median view | slowest view |
|---|---:|---:|
{table}

**Tablestore requests per view: {requests_per_view}** ({" / ".join(map(str, per_conn))} per connection:
ListTable and ListTunnel once each, DescribeTunnel per tunnel, DescribeTable per table without a tunnel; here
every table has one). The bounds: per connection at most 2 + 50 + 50 calls (the caps), at most 8 calls in
flight over all connections, 2 s connect and 5 s read timeouts, one retry, a 12 s deadline for the view. With
the injected latency a page making its calls one after another would wait {serial} × {args.latency * 1000:.0f} ms =
{serial * args.latency:.1f} s; calls in flight together hide most of it.
"""
    out = ROOT / "benchmarks" / "results" / "ui.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
