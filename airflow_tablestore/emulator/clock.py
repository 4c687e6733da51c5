"""The emulator's clock: wall time plus an offset that tests can move (time travel) via the control API."""

from __future__ import annotations

import threading
import time


class Clock:
    """Monotonic-enough wall clock in micro/milli/nanoseconds with an adjustable offset."""

    def __init__(self) -> None:
        self._offset_us = 0
        self._last_us = 0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        """Move emulated time forward (or backward with a negative value)."""
        with self._lock:
            self._offset_us += int(seconds * 1_000_000)

    @property
    def offset_seconds(self) -> float:
        return self._offset_us / 1_000_000

    def now_us(self) -> int:
        """Current time in µs; strictly increasing across calls (stream sequence timestamps rely on it)."""
        with self._lock:
            now = time.time_ns() // 1000 + self._offset_us
            if now <= self._last_us:
                now = self._last_us + 1
            self._last_us = now
            return now

    def now_ms(self) -> int:
        return self.now_us() // 1000

    def now_ns(self) -> int:
        return self.now_us() * 1000

    def now_s(self) -> float:
        return self.now_us() / 1_000_000
