"""The real Airflow CLI with the provider installed: ``providers list`` and one ``airflow dags test`` run.

Each command runs in a subprocess with its own temporary AIRFLOW_HOME, the DAGs folder ``tests/dags`` and
the ``tablestore_default`` connection from ``AIRFLOW_CONN_TABLESTORE_DEFAULT`` pointing at an emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow_helpers import own_emulator, unique

from airflow_tablestore.client.epoch import parse_epoch_ns as to_epoch_ns

DAGS_FOLDER = Path(__file__).resolve().parents[1] / "dags"
AIRFLOW = [str(Path(sys.executable).parent / "airflow")]

tablestore_emulator = own_emulator()  # these tests move the emulator's clock


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory, tablestore_emulator: Any) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW_CONN_TABLESTORE_DEFAULT": tablestore_emulator.airflow_connection_json(),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    })
    return env


def _run(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(AIRFLOW + list(args), env=env, capture_output=True, text=True, timeout=timeout)


def test_providers_list_shows_the_package_with_its_version(airflow_env: dict[str, str]) -> None:
    import airflow_tablestore

    result = _run(airflow_env, "providers", "list")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if "airflow-provider-tablestore" in line]
    assert lines, result.stdout[-3000:]
    assert airflow_tablestore.__version__ in lines[0]
    # the description renders as plain text (no RST link markup such as `...`__ or <https://...>)
    result = _run(airflow_env, "providers", "list", "-o", "json")
    assert result.returncode == 0, result.stderr[-3000:]
    (info,) = [p for p in json.loads(result.stdout) if p["package_name"] == "airflow-provider-tablestore"]
    assert info["description"].startswith("Alibaba Cloud Tablestore (OTS) tables and Tunnel Service")
    assert not any(mark in info["description"] for mark in ("`", "<http", "__"))


@pytest.mark.slow
def test_connections_test_uses_the_hook(airflow_env: dict[str, str], tablestore_emulator: Any) -> None:
    env = dict(airflow_env, AIRFLOW__CORE__TEST_CONNECTION="Enabled")
    ok = _run(env, "connections", "test", "tablestore_default")
    assert ok.returncode == 0 and "Connection success!" in ok.stdout, ok.stdout[-2000:] + ok.stderr[-2000:]

    bad = json.loads(tablestore_emulator.airflow_connection_json())
    bad["password"] = "cli-wrong-secret-0987"
    env["AIRFLOW_CONN_TABLESTORE_BAD"] = json.dumps(bad)
    failed = _run(env, "connections", "test", "tablestore_bad")
    assert "Connection success!" not in failed.stdout
    assert "OTSAuthFailed" in failed.stdout + failed.stderr


class _Output:
    """Collects a subprocess's merged output in a background thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            if self._proc.poll() is not None:
                self._thread.join(5)
                return any(text in line for line in self.lines)
            time.sleep(0.2)
        return False

    @property
    def text(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def migrated_env(airflow_env: dict[str, str]) -> Iterator[dict[str, str]]:
    result = _run(airflow_env, "db", "migrate")
    assert result.returncode == 0, result.stderr[-3000:]
    yield airflow_env


@pytest.mark.slow
def test_dags_test_create_table_tunnel_and_deferred_sensor(
    migrated_env: dict[str, str], tablestore_emulator: Any, tablestore_tunnel_client: Any
) -> None:
    """create table -> create tunnel -> deferrable sensor, the trigger run inline by ``airflow dags test``.

    The cutoff lies one hour ahead, so the sensor must defer. Once it has, the emulator clock moves two hours
    forward and a real TunnelWorker consumes the tunnel: its checkpoints carry the consume point past the
    cutoff and the inline trigger fires.
    """
    from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig
    from airflow_tablestore.client.tunnel.processor import CallbackProcessor
    from airflow_tablestore.client.tunnel.worker import TunnelWorker

    table, tunnel = unique("e2e"), "e2e_tunnel"
    cutoff = datetime.now(UTC) + timedelta(hours=1)
    conf = json.dumps({"table": table, "tunnel": tunnel, "cutoff": cutoff.isoformat()})
    proc = subprocess.Popen(AIRFLOW + ["dags", "test", "tablestore_provider_e2e", "--conf", conf],
                            env=migrated_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = _Output(proc)
    worker = None
    try:
        assert output.wait_for("Deferring", timeout=240), output.text[-5000:]
        description = tablestore_tunnel_client.describe_tunnel(table, tunnel)
        assert description.consume_point_ns < to_epoch_ns(cutoff)  # the sensor is really waiting

        tablestore_emulator.control.advance_time(2 * 3600)
        config = TunnelWorkerConfig(heartbeat_interval_s=0.5, heartbeat_timeout_s=30.0, checkpoint_interval_s=0.2,
                                    allow_short_intervals=True)
        worker = TunnelWorker(tablestore_tunnel_client, description.tunnel.tunnel_id,
                              CallbackProcessor(lambda records, ctx: None), config).start()
        rc = proc.wait(timeout=300)
    finally:
        if worker is not None:
            worker.shutdown(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = output.text
    assert rc == 0, text[-5000:]
    assert "running trigger in line" in text, text[-5000:]  # the deferrable path, not a poke
    assert "reached the cutoff" in text, text[-5000:]
    finished = [line for line in text.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], text[-5000:]
    assert tablestore_tunnel_client.describe_tunnel(table, tunnel).consume_point_ns >= to_epoch_ns(cutoff)
