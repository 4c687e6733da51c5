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


def finish_or_kill(emulator: EmulatorProcess, proc: subprocess.Popen[str], kill: Kill) -> tuple[int, str, bool]:
    """Let the job run, SIGKILLing its process group ``kill.delay_s`` after the server's ``kill.nth`` answer to
    ``kill.path``; returns (exit code, output, whether the kill fired). ``kill.reached`` says what happened."""
    seen = 0
    fired = threading.Event()

    def listen(line: str) -> None:
        nonlocal seen
        match = REQUEST.search(line)
        if match is None or fired.is_set() or match.group(1) != kill.path:
            return
        seen += 1
        if seen == kill.nth:
            fired.set()
            threading.Thread(target=kill_later, args=(proc, kill.delay_s), daemon=True).start()

    emulator.listeners.append(listen)
    try:
        code, out = finish(proc)
    finally:
        emulator.listeners.remove(listen)
    kill.reached = (f"after answer {kill.nth} to {kill.path} (+{kill.delay_s * 1000:.0f} ms)" if fired.is_set()
                    else COMPLETED)
    return code, out, fired.is_set()


def restart_after_reads(emulator: EmulatorProcess, proc: subprocess.Popen[str], after_reads: int,
                        wait_s: float = 180) -> bool:
    """SIGKILL the emulator after its ``after_reads``-th ReadRecords answer to the running job and restart it on
    the same port and data; False when the job ended first."""
    seen = 0
    fired = threading.Event()

    def listen(line: str) -> None:
        nonlocal seen
        match = REQUEST.search(line)
        if match and match.group(1) == "/tunnel/readrecords" and not fired.is_set():
            seen += 1
            if seen == after_reads:
                fired.set()

    emulator.listeners.append(listen)
    try:
        assert fired.wait(wait_s) or proc.poll() is not None
    finally:
        emulator.listeners.remove(listen)
    if fired.is_set():
        emulator.kill()
        time.sleep(1.0)
        emulator.start()
    return fired.is_set()
