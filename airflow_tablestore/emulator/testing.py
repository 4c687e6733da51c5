"""Run a real emulator process for tests (yours too): ``with EmulatorProcess() as emu: emu.endpoint``.

The emulator runs as a separate process (``python -m airflow_tablestore.emulator``) on 127.0.0.1 with a free
port, so tests exercise the real wire protocol. ``restart()`` keeps the data directory (persistence tests);
``control`` drives time and faults (see :mod:`airflow_tablestore.emulator.control`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

DEFAULT_INSTANCE = "emulator"
DEFAULT_ACCESS_KEY_ID = "emulator-access-key-id"
DEFAULT_ACCESS_KEY_SECRET = "emulator-access-key-secret"
_ENDPOINT_RE = re.compile(r"(http://[0-9.]+:\d+)")


class EmulatorProcess:
    """A running emulator subprocess. Use as a context manager or call ``start()``/``stop()``."""

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        instance: str = DEFAULT_INSTANCE,
        access_key_id: str = DEFAULT_ACCESS_KEY_ID,
        access_key_secret: str = DEFAULT_ACCESS_KEY_SECRET,
        port: int = 0,
        extra_args: list[str] | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tablestore-emulator-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.instance = instance
        self.access_key_id = access_key_id
        self.access_key_secret = access_key_secret
        self.port = port
        self.extra_args = list(extra_args or [])
        self.startup_timeout = startup_timeout
        self.endpoint = ""
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.listeners: list[Callable[[str], None]] = []
        """Called with every output line (with ``--log-level DEBUG`` that includes one line per request)."""

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> EmulatorProcess:
        cmd = [
            sys.executable, "-m", "airflow_tablestore.emulator",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--instance", self.instance,
            "--access-key-id", self.access_key_id,
            "--data-dir", str(self.data_dir),
            *self.extra_args,
        ]
        # the secret goes through the environment, not the process list
        env = dict(os.environ, TABLESTORE_EMULATOR_ACCESS_KEY_SECRET=self.access_key_secret)
        self.process = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
        )
        deadline = time.monotonic() + self.startup_timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = _ENDPOINT_RE.search(line)
            if match:
                self.endpoint = match.group(1)
                self.port = int(self.endpoint.rsplit(":", 1)[1])
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        self.stop()
        raise RuntimeError("emulator did not start:\n" + "".join(self.output))

    def _drain(self) -> None:
        proc = self.process
        if proc is None or proc.stdout is None:
            return
        for line in proc.stdout:
            self.output.append(line)
            for listener in list(self.listeners):
                listener(line)
            if len(self.output) > 2000:
                del self.output[:1000]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Stop the process (SIGTERM by default, SIGKILL to simulate a crash); returns its exit code."""
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> EmulatorProcess:
        """Stop and start again on the same port and data directory."""
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- conveniences -------------------------------------------------------------------------------
    @property
    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``TableClient``/``TunnelClient``."""
        return {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key_id,
            "access_key_secret": self.access_key_secret,
            "instance_name": self.instance,
        }

    def airflow_connection_json(self) -> str:
        """The value of an ``AIRFLOW_CONN_<ID>`` environment variable pointing at this emulator."""
        import json

        return json.dumps({
            "conn_type": "tablestore",
            "host": self.endpoint,
            "login": self.access_key_id,
            "password": self.access_key_secret,
            "extra": {"instance_name": self.instance},
        })

    @property
    def control(self) -> Any:
        from airflow_tablestore.emulator.control import ControlClient

        return ControlClient(self.endpoint, self.access_key_secret)
