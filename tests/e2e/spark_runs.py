"""End-to-end helpers: run the real consumer with ``spark-submit`` (local[2]), kill it, and read results."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import Record
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.consumer.job import application_path
from testing.jvm import FAST_JVM

BIN = Path(sys.executable).parent


def consumer_env(tablestore_emulator: EmulatorProcess) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLESTORE_")}
    env.update({
        "TABLESTORE_ENDPOINT": tablestore_emulator.endpoint,
        "TABLESTORE_INSTANCE": tablestore_emulator.instance,
        "TABLESTORE_ACCESS_KEY_ID": tablestore_emulator.access_key_id,
        "TABLESTORE_ACCESS_KEY_SECRET": tablestore_emulator.access_key_secret,
        "PATH": str(BIN) + os.pathsep + env.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TABLESTORE_SPARK_LOG_LEVEL": "ERROR",
        "SPARK_LOCAL_IP": "127.0.0.1",  # loopback only; also makes Python workers start much faster here
    })
    return env




@dataclasses.dataclass
class ConsumerRun:
    returncode: int
    output: str
    killed: bool


def _python_driver_pids(jvm_pid: int) -> list[int]:
    children = subprocess.run(["pgrep", "-P", str(jvm_pid)], capture_output=True, text=True).stdout.split()
    pids = []
    for pid in children:
        try:
            if "consumer.py" in Path(f"/proc/{pid}/cmdline").read_text():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that are still running (zombies waiting to be reaped do not count)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            pids.append(int(stat.parent.name))
    return pids


def wait_until_gone(pgid: int, timeout: float = 30) -> None:
    """Wait for the killed group (JVM, Python driver and workers) to die completely before the next run."""
    deadline = time.monotonic() + timeout
    while _live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_consumer(tablestore_emulator: EmulatorProcess, args: Sequence[str], *, kill_when: str | None = None,
                 sigterm_driver: bool = False, timeout: float = 300) -> ConsumerRun:
    """``spark-submit --master local[2] consumer.py ARGS``; with ``kill_when`` (a regex), SIGKILL the whole
    process group (JVM, Python driver, Python workers) as soon as a log line matches — or, with
    ``sigterm_driver``, send SIGTERM to the Python driver only (what a container stop does)."""
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", FAST_JVM, application_path(), *args]
    proc = subprocess.Popen(cmd, env=consumer_env(tablestore_emulator), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    killed = threading.Event()
    pattern = re.compile(kill_when) if kill_when else None

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if pattern is not None and not killed.is_set() and pattern.search(line):
                killed.set()
                if sigterm_driver:
                    for pid in _python_driver_pids(proc.pid):
                        os.kill(pid, signal.SIGTERM)
                else:
                    os.killpg(proc.pid, signal.SIGKILL)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        raise AssertionError("consumer timed out:\n" + "".join(lines[-80:])) from None
    finally:
        reader.join(10)
    if killed.is_set():
        wait_until_gone(proc.pid)
    return ConsumerRun(proc.returncode, "".join(lines), killed.is_set())


def base_rows(records: list[Record]) -> dict[Any, tuple[Any, ...]]:
    """Base-data records as a snapshot; fails on a duplicate primary key."""
    out: dict[Any, tuple[Any, ...]] = {}
    for r in records:
        if r.sequence is None:
            assert r.primary_key not in out, f"base record {r.primary_key} written twice"
            out[r.primary_key] = tuple(sorted(((c.name, c.value, c.timestamp) for c in r.columns),
                                              key=lambda c: (c[0], c[2] or 0, repr(c[1]))))
    return out
