"""The command line: ready line, temporary data dir cleanup, clean exit on SIGTERM/SIGINT, V4 requests."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from airflow_tablestore.emulator import auth
from airflow_tablestore.emulator.config import EmulatorConfig, parse_args


def test_config_defaults_and_secret_not_in_repr() -> None:
    cfg = parse_args([])
    assert (cfg.host, cfg.port, cfg.instance, cfg.stream_partitions, cfg.range_page_rows) == (
        "127.0.0.1", 0, "emulator", 4, 5000)
    assert cfg.verify_signature is True
    assert "emulator-access-key-secret" not in repr(EmulatorConfig())
    assert parse_args(["--no-verify-signature", "--stream-partitions", "2"]).stream_partitions == 2


def test_secret_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABLESTORE_EMULATOR_ACCESS_KEY_SECRET", "from-env")
    assert parse_args([]).access_key_secret == "from-env"
    assert parse_args(["--access-key-secret", "flag"]).access_key_secret == "flag"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_temp_data_dir_and_clean_shutdown(sig: int) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "airflow_tablestore.emulator", "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+) instance=emulator data_dir=(\S+)", line)
        assert m, line
        endpoint, data_dir = m.group(1), Path(m.group(2))
        assert (data_dir / "emulator.sqlite3").exists()
        body = b""
        now = dt.datetime.now(dt.UTC)
        headers = {
            "x-ots-date": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "x-ots-apiversion": "2015-12-31",
            "x-ots-accesskeyid": "emulator-access-key-id",
            "x-ots-instancename": "emulator",
            "x-ots-contentmd5": base64.b64encode(hashlib.md5(body).digest()).decode(),
            "x-ots-signdate": now.strftime("%Y%m%d"),
            "x-ots-signregion": "cn-hangzhou",
        }
        key = auth.v4_key("emulator-access-key-secret", headers["x-ots-signdate"], "cn-hangzhou")
        headers["x-ots-signaturev4"] = auth.sign_v4(key, "/ListTable", headers)
        resp = requests.post(endpoint + "/ListTable", data=body, headers=headers, timeout=10)
        assert resp.status_code == 200
        signed = {k.lower(): v for k, v in resp.headers.items() if k.lower().startswith("x-ots-")}
        assert resp.headers["Authorization"] == "OTS emulator-access-key-id:" + auth.sign_response(
            key, "/ListTable", signed)  # V4 requests get responses signed with the derived key
        no_instance = {k: v for k, v in headers.items() if k != "x-ots-instancename"}
        resp = requests.post(endpoint + "/ListTable", data=body, headers=no_instance, timeout=10)
        assert resp.status_code == 400  # errors to V4 requests are signed with the derived key too
        signed = {k.lower(): v for k, v in resp.headers.items() if k.lower().startswith("x-ots-")}
        assert resp.headers["Authorization"].endswith(":" + auth.sign_response(key, "/ListTable", signed))
        headers["x-ots-signaturev4"] = "AAAA"
        assert requests.post(endpoint + "/ListTable", data=body, headers=headers, timeout=10).status_code == 403
        proc.send_signal(sig)
        assert proc.wait(20) == 0
        assert not data_dir.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "airflow_tablestore.emulator", "--log-level", "WARNING", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_data_dir_is_created_with_its_parents(tmp_path: Path) -> None:
    data_dir = tmp_path / "not" / "there" / "yet"
    proc = subprocess.Popen([sys.executable, "-m", "airflow_tablestore.emulator", "--data-dir", str(data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "listening on http://127.0.0.1:" in proc.stdout.readline()
        assert (data_dir / "emulator.sqlite3").exists()
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.parametrize("kind", ["file", "under-a-file", "not-creatable"])
def test_unusable_data_dir_is_one_line(tmp_path: Path, kind: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    # /proc refuses new directories even to root (a read-only directory would not stop root)
    target = {"file": blocker, "under-a-file": blocker / "sub", "not-creatable": Path("/proc/emulator-data")}[kind]
    result = _run_cli("--data-dir", str(target))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tablestore-emulator: ") and str(target) in lines[0]
    assert "Traceback" not in result.stderr


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _run_cli("--port", str(busy.getsockname()[1]))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot start on 127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


def _start(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "airflow_tablestore.emulator", "--log-level", "WARNING", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"(http://[0-9.]+:\d+)", line)
    assert match, line + (proc.stderr.read() if proc.stderr else "")
    return proc, match.group(1)


def test_clock_start_puts_the_emulator_in_the_past_and_refuses_to_go_before_stored_data(tmp_path: Path) -> None:
    from airflow_tablestore.emulator.control import ControlClient
    from airflow_tablestore.emulator.testing import EmulatorProcess

    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with EmulatorProcess(data_dir=tmp_path, extra_args=["--clock-start", "2026-11-01T00:00:00Z"]) as emu:
        now = ControlClient(emu.endpoint, emu.access_key_secret).state()["now_us"] / 1e6
        assert 0 <= now - start.timestamp() < 120
        from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema
        from airflow_tablestore.client.table.client import TableClient

        with TableClient(**emu.client_kwargs) as client:
            client.create_table(TableSchema("past", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                            stream=StreamSpec(enabled=True)))
            client.put_row("past", [("id", 1)], {"v": 1})
    # the data dir now holds a change stamped 2026-11-01: starting earlier would stamp new changes below it
    result = _run_cli("--data-dir", str(tmp_path), "--clock-start", "2026-10-01T00:00:00Z")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "before changes already stored" in result.stderr and "Traceback" not in result.stderr


def test_binding_all_interfaces_warns(tmp_path: Path) -> None:
    proc, _ = _start("--host", "0.0.0.0")
    try:
        assert proc.stderr is not None
        warning = proc.stderr.readline()
        assert "WARNING: listening on 0.0.0.0, not only on loopback" in warning
    finally:
        proc.terminate()
        proc.wait(15)


def test_secret_from_a_file_keeps_it_out_of_the_process_list(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("file-secret-value\n")
    proc, endpoint = _start("--access-key-secret-file", str(secret_file))
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"file-secret-value" not in cmdline
        from airflow_tablestore.client.errors import AuthError
        from airflow_tablestore.client.table.client import TableClient

        common = {"endpoint": endpoint, "access_key_id": "emulator-access-key-id", "instance_name": "emulator"}
        with TableClient(**common, access_key_secret="file-secret-value") as client:
            assert client.list_tables() == []
        with TableClient(**common, access_key_secret="emulator-access-key-secret") as client, \
                pytest.raises(AuthError):
            client.list_tables()
    finally:
        proc.terminate()
        proc.wait(15)


def test_missing_secret_file_is_one_line(tmp_path: Path) -> None:
    result = _run_cli("--access-key-secret-file", str(tmp_path / "nope"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--access-key-secret-file" in result.stderr.strip().splitlines()[-1]
