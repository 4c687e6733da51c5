"""Back-off: the one rule for how long to wait before trying again, with the per-use presets.

``delay(n)`` for the ``n``-th retry (0-based) is ``min(max_s, base_s × factor^n)`` (``linear``:
``base_s × (n+1)``), then jittered: either *full jitter* (uniform between 0 and that value, for requests many
clients may repeat at once) or a symmetric ``±jitter`` fraction. The presets, one per use, are the single
source of these numbers (the request and empty-read ones follow the official SDKs; the others are this
project's):

* :data:`REQUEST_RETRY` / :data:`THROTTLED_REQUEST_RETRY`: a failed request (the table and tunnel clients'
  :class:`~airflow_tablestore.client.retry.RetryPolicy`; throttling starts slower because the service asked).
* :data:`EMPTY_READ`: a tunnel stream channel that had nothing new to read (the tunnel worker).
* :data:`PROCESSOR_RETRY`: redelivering a batch whose processing raised (the stream worker).
* :data:`NEW_TABLE_WRITE`: a write into a table just created, which the service may not accept at once (the
  streaming source's position table).
* :data:`FAILED_ROUND`: a Spark round in which every channel failed (the next round waits longer each time).
* :data:`FINISH_CHECKPOINT_RETRY`: the tunnel worker's "finished" checkpoint that the server did not take.

:func:`spread` is the other waiting rule: a uniformly random delay in a range, which spreads the reconnects of
many workers that lost their session at the same moment (the official SDKs' reconnect rule).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_EXPONENT = 32
"""The exponent is capped so that ``factor^n`` never overflows; ``max_s`` caps the delay long before."""


@dataclass(frozen=True)
class Backoff:
    """Exponential (or ``linear``) back-off, capped at ``max_s``, with ``±jitter`` or full jitter.

    The defaults are those of the tunnel worker's empty-read back-off (:data:`EMPTY_READ`).
    """

    base_s: float = 0.02
    factor: float = 5.0
    jitter: float = 0.25
    max_s: float = 5.0
    full_jitter: bool = False
    linear: bool = False

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.max_s < 0:
            raise ValueError("back-off delays must be non-negative")
        if self.factor < 1:
            raise ValueError("back-off factor must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("back-off jitter must be between 0 and 1")

    def ceiling(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (0-based)."""
        attempt = max(attempt, 0)
        if self.linear:
            return min(self.max_s, self.base_s * (attempt + 1))
        return min(self.max_s, self.base_s * (self.factor ** min(attempt, MAX_EXPONENT)))

    def delay(self, attempt: int) -> float:
        """Delay in seconds before retry number ``attempt`` (0-based), jittered."""
        ceiling = self.ceiling(attempt)
        if self.full_jitter:
            return random.uniform(0.0, ceiling)
        if self.jitter:
            return max(0.0, ceiling * (1.0 + random.uniform(-self.jitter, self.jitter)))
        return ceiling


REQUEST_RETRY = Backoff(base_s=0.1, factor=2.0, jitter=0.0, max_s=3.0, full_jitter=True)
THROTTLED_REQUEST_RETRY = Backoff(base_s=0.3, factor=2.0, jitter=0.0, max_s=3.0, full_jitter=True)
EMPTY_READ = Backoff()
PROCESSOR_RETRY = Backoff(base_s=0.1, factor=2.0, jitter=0.0, max_s=10.0)
NEW_TABLE_WRITE = Backoff(base_s=0.5, factor=1.0, jitter=0.0, max_s=5.0, linear=True)
FAILED_ROUND = Backoff(base_s=1.0, factor=2.0, jitter=0.0, max_s=30.0)
FINISH_CHECKPOINT_RETRY = Backoff(base_s=0.2, factor=1.0, jitter=0.0, max_s=1.0, linear=True)


def spread(low_s: float, high_s: float) -> float:
    """A uniformly random delay in ``[low_s, high_s]`` seconds (spreads simultaneous reconnects)."""
    return random.uniform(low_s, high_s)
