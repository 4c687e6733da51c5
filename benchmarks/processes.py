"""CPU and memory of processes from /proc: one process, or a process tree sampled while it runs (Linux only)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _stat(pid: int) -> tuple[int, float, float, int] | None:
    """(parent pid, CPU seconds, RSS MB, threads) of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[21]) * _PAGE_MB, int(fields[17])


@dataclass
class TreeUsage:
    """What the sampled processes used, summed by class (the classifier's names)."""

    cpu_s: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    peak_threads: dict[str, int] = field(default_factory=dict)
    """The most threads the class's processes had together at one sample."""


class TreeSampler:
    """Samples the descendants of ``root`` every ``interval`` seconds until ``stop()``: each process's last CPU
    reading (a process's final fraction of an interval is missed) and its peak RSS, classed by
    ``classify(cmdline)``. Use as a context manager around the process's run."""

    def __init__(self, root: int, classify: Callable[[str], str], interval: float = 0.2) -> None:
        self.root = root
        self.classify = classify
        self.interval = interval
        self._cpu: dict[int, float] = {}
        self._rss: dict[int, float] = {}
        self._kind: dict[int, str] = {}
        self._threads: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        parents: dict[int, list[int]] = {}
        stats: dict[int, tuple[float, float, int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                got = _stat(int(entry.name))
                if got is not None:
                    parents.setdefault(got[0], []).append(int(entry.name))
                    stats[int(entry.name)] = (got[1], got[2], got[3])
        todo = [self.root]
        threads: dict[str, int] = {}
        while todo:
            pid = todo.pop()
            todo += parents.get(pid, [])
            if pid not in stats:
                continue
            try:  # read every time: a process may exec another program (a launcher script becomes the JVM)
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                cmdline = ""
            if cmdline:  # empty once the process exited (a zombie): keep what it was
                self._kind[pid] = self.classify(cmdline)
            elif pid not in self._kind:
                continue
            cpu, rss, count = stats[pid]
            self._cpu[pid] = max(cpu, self._cpu.get(pid, 0.0))
            self._rss[pid] = max(rss, self._rss.get(pid, 0.0))
            threads[self._kind[pid]] = threads.get(self._kind[pid], 0) + count
        for kind, count in threads.items():
            self._threads[kind] = max(count, self._threads.get(kind, 0))

    def usage(self) -> TreeUsage:
        out = TreeUsage()
        for pid, kind in self._kind.items():
            out.cpu_s[kind] = out.cpu_s.get(kind, 0.0) + self._cpu.get(pid, 0.0)
            out.peak_rss_mb[kind] = max(out.peak_rss_mb.get(kind, 0.0), self._rss.get(pid, 0.0))
            out.processes[kind] = out.processes.get(kind, 0) + 1
        out.peak_threads = dict(self._threads)
        return out
