"""What the crash tests share: planned kills of a process group at a server request, the source writer thread,
and random faults injected into an emulator."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import threading
import time

from airflow_tablestore.client.model import RowWrite
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from demo import replication as demo

REQUEST = re.compile(r'"POST (/[\w/]+) HTTP')
COMPLETED = "run completed before the kill point"
ROWS = 6000
"""Rows of the source table the crash tests start from (the writer's changes touch these)."""


@dataclasses.dataclass
class Kill:
    """One planned kill: after the ``nth`` answer to ``path`` (on ``where``: source or sink emulator) plus
    ``delay_s``. ``reached`` is filled in: what the server had last answered when the group was killed."""

    phase: str
    path: str
    nth: int
    delay_s: float
    where: str = "source"
    reached: str | None = None


def finish(proc: subprocess.Popen[str], timeout: float = 400) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError("consumer timed out:\n" + out[-6000:]) from None
    return proc.returncode, out


def kill_later(proc: subprocess.Popen[str], delay_s: float) -> None:
    if delay_s:
        time.sleep(delay_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


class SourceWriter:
    """Writes changes to the source from a thread while runs go on; remembers every change written."""

    def __init__(self, client: TableClient, table: str) -> None:
        self.client, self.table = client, table
        self.writes: list[RowWrite] = []
        self.gone: set[int] = set()
        self._offset = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def burst(self, n: int = 60) -> None:
        with self._lock:  # the background thread and the test both write
            self._offset += 1
            writes = demo.change_writes(self.table, ROWS, n, offset=self._offset, gone=self.gone)
            demo.apply_writes(self.client, writes)
            self.writes.extend(writes)

    def _loop(self) -> None:
        while not self._stop.wait(0.7):
            self.burst(30)

    def __enter__(self) -> SourceWriter:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)


def add_random_faults(emulator: EmulatorProcess, seed: int) -> None:
    control = emulator.control
    control.add_fault("*", "OTSServerBusy", count=10**6, probability=0.05, seed=seed)
    control.add_fault("*", "OTSTimeout", message="Request timeout.", count=10**6, probability=0.03 / 0.95)
    control.add_fault("*", None, count=10**6, delay_s=3.5, probability=0.02 / 0.92)
