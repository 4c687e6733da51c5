"""``ChannelPools``: the tunnel worker's bounded threads, shared by all its channels (the Java worker's model).

A worker owns one ``ChannelPools``: a read pool (``read_threads`` threads making ReadRecords calls), a process
pool (``max_channel_parallel`` threads calling the processor), one timer thread for the empty-read back-off
of idle stream channels, and a budget of ``max_buffered_answers`` ReadRecords answers held at once (read,
being read, or waiting to be processed). Threads and buffered answers are therefore fixed by configuration,
whatever the number of channels: a channel with nothing to do holds no thread. Like the threads they replace,
the pools' threads are daemon threads (a process may exit while a processor blocks) and log what a task raises.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

THREAD_PREFIX = "tunnel-channel-"
"""Name prefix of the process pool's threads (where the user's processor runs)."""


class _Timer:
    """One thread running callbacks at their due time (earliest first)."""

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._order), callback))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                if self._closed:
                    return
                _, _, callback = heapq.heappop(self._heap)
            try:
                callback()
            except Exception:  # noqa: BLE001 - a callback's failure must not stop the other channels' timers
                log.exception("tunnel timer callback failed")


class _Pool:
    """At most ``size`` daemon threads running submitted tasks in order of submission; a thread is started only
    when no idle one can take the task."""

    def __init__(self, size: int, prefix: str) -> None:
        self._size, self._prefix = size, prefix
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                return
            self._tasks.put(task)
            if self._idle <= 0 and self._threads < self._size:
                self._threads += 1
                threading.Thread(target=self._loop, name=f"{self._prefix}{self._threads}", daemon=True).start()
            else:
                self._idle -= 1  # one idle thread will take it (counted back when it waits again)

    def close(self) -> None:
        """Let the threads end once the tasks queued before are done."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._tasks.put(None)

    def _loop(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except BaseException:  # noqa: BLE001 - nothing else would see it; the pool keeps serving
                log.exception("tunnel pool task %r failed", task)
            with self._lock:
                self._idle += 1


class ChannelPools:
    """The read pool, the process pool, the back-off timer and the buffered-answers budget of one worker."""

    def __init__(self, *, read_threads: int, process_threads: int, max_buffered_answers: int) -> None:
        self.read_threads, self.process_threads = read_threads, process_threads
        self.max_buffered_answers = max_buffered_answers
        self._reads = _Pool(read_threads, "tunnel-reader-")
        self._processes = _Pool(process_threads, THREAD_PREFIX)
        self._timer = _Timer("tunnel-timer")
        self._lock = threading.Lock()
        self._held = 0
        self._waiting: deque[Callable[[], None]] = deque()
        self._closed = False

    # -- the buffered-answers budget ----------------------------------------------------------------
    def try_hold(self, on_granted: Callable[[], None]) -> bool:
        """Take one answer slot. When none is free (or channels wait already: first come, first served), the
        caller is queued and ``on_granted`` runs on the read pool once a slot is handed to it: it then holds the
        slot, and gives it back with :meth:`release` if it no longer needs it."""
        with self._lock:
            if self._held < self.max_buffered_answers and not self._waiting:
                self._held += 1
                return True
            self._waiting.append(on_granted)
            return False

    def release(self) -> None:
        """Give one answer slot back: to the longest-waiting channel if any, else to the budget."""
        with self._lock:
            wake = self._waiting.popleft() if self._waiting else None
            if wake is None:
                self._held -= 1
        if wake is not None:
            self._reads.submit(wake)

    @property
    def held(self) -> int:
        """Answer slots in use right now (read in flight, buffered or being processed)."""
        return self._held

    # -- scheduling ---------------------------------------------------------------------------------
    def read(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the read pool."""
        self._reads.submit(task)

    def later(self, delay_s: float, task: Callable[[], None]) -> None:
        """Run ``task`` on the read pool after ``delay_s`` (the timer waits; no pool thread, no answer slot)."""
        if not self._closed:
            self._timer.call_later(delay_s, lambda: self.read(task))

    def process(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the process pool."""
        self._processes.submit(task)

    def close(self) -> None:
        """Stop the timer and let the pools' threads end once their queued work is done."""
        self._closed = True
        self._timer.close()
        self._reads.close()
        self._processes.close()
