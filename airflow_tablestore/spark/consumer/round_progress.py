"""A progress line every few seconds while a Spark round runs, so a long round is not silent in the task log.

A round is one Spark job (a bounded number of tasks, each reading some of the channels) whose records only reach
the driver when it ends; meanwhile the driver can see how many of its tasks finished (Spark's status tracker) and,
for stream channels, how far the slowest one has been checkpointed (DescribeTunnel).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0


def tasks_done(spark: Any) -> tuple[int, int] | None:
    """``(completed, total)`` tasks of the running stages, or ``None`` without a real Spark session."""
    try:
        tracker = spark.sparkContext.statusTracker()
        done = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total
    except Exception:  # a stub session in tests, or Spark shutting down: progress is best effort
        return None


class RoundProgress:
    """Context manager: while the block runs, log :meth:`line` every ``interval_s`` seconds."""

    def __init__(self, number: int, channels: int, spark: Any, lag_line: Callable[[], str | None],
                 interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.number = number
        self.channels = channels
        self.spark = spark
        self.lag_line = lag_line
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def line(self) -> str:
        """The progress line for now."""
        elapsed = time.monotonic() - self._started
        tasks = tasks_done(self.spark)
        done = f"{tasks[0]}/{tasks[1]} Spark tasks done" if tasks and tasks[1] else f"{self.channels} channels"
        try:
            lag = self.lag_line()
        except Exception as exc:  # a DescribeTunnel hiccup must not disturb the round
            lag = f"tunnel state unavailable ({type(exc).__name__})"
        return f"round {self.number} in progress: {elapsed:.0f}s, {done}" + (f"; {lag}" if lag else "")

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            log.info("%s", self.line())

    def __enter__(self) -> RoundProgress:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="round-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
