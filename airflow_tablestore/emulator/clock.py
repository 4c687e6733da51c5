"""The emulator's clock: wall time plus an offset that tests move (time travel) through the control API.

Time never goes backwards: stream records and cell versions are stamped with it, and the stream log, tunnel
consume points and the Stream API all rely on stamps increasing with the log. Moving the clock back would give
new changes stamps older than changes already recorded, which the real service never does; it is refused.
To work in the past (for example, to write changes inside an interval a backfill replays), start the emulator
with ``--clock-start``/``--clock-offset`` before it records anything.
"""

from __future__ import annotations

import threading
import time


class ClockError(ValueError):
    """A clock change that would make time go backwards."""


class Clock:
    """Wall clock in micro/milli/nanoseconds plus an adjustable offset; strictly increasing across calls."""

    def __init__(self, offset_seconds: float = 0.0, not_before_us: int = 0) -> None:
        self._offset_us = int(offset_seconds * 1_000_000)
        self._last_us = not_before_us
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        """Move emulated time forward by ``seconds`` (> 0); a negative value raises :class:`ClockError`."""
        if not seconds >= 0:
            raise ClockError(f"the emulator clock only moves forward (got {seconds} s): time stamps the "
                             "stream log; start the emulator with --clock-start/--clock-offset to work in "
                             "the past")
        with self._lock:
            self._offset_us += int(seconds * 1_000_000)

    def set_now(self, epoch_seconds: float) -> None:
        """Make "now" ``epoch_seconds``; refused (:class:`ClockError`) if that is before a time already given
        out."""
        target_us = int(epoch_seconds * 1_000_000)
        with self._lock:
            if target_us <= self._last_us:
                raise ClockError(f"cannot set the clock to {epoch_seconds}: it already handed out "
                                 f"{self._last_us / 1e6:.6f} (time only moves forward)")
            self._offset_us = target_us - time.time_ns() // 1000

    def not_before(self, stamp_us: int) -> None:
        """Never hand out ``stamp_us`` or anything earlier (the newest stamp already stored)."""
        with self._lock:
            self._last_us = max(self._last_us, stamp_us)

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
