"""Retry policy: which failures are retried, how long to wait, and when to give up.

* Throttling / transient-contention codes (``OTSServerBusy``, ``OTSRowOperationConflict``, ...) are retried
  for **every** operation: the service guarantees nothing was applied.
* Permanent errors (credentials, permissions, bad parameters, missing or expired objects: ``PERMANENT_ERRORS``)
  are never retried, and a long-lived consumer (the tunnel session) stops on them at once (:meth:`is_permanent`).
* Server errors (5xx, ``OTSInternalServerError``, ``OTSTimeout``, ...), timeouts and connection errors are
  retried only for **idempotent** operations (reads, listings, tunnel reads), because a write may have been
  applied before the failure.
* Delays use exponential backoff with full jitter: ``uniform(0, min(max_delay, base * 2**(attempt-1)))``
  (the rule itself is :class:`~airflow_tablestore.client.backoff.Backoff`).
  Attempts are bounded by ``max_attempts`` and the whole call by ``total_budget_s``: a retry whose delay
  would end past the budget is not made, and the last error is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from airflow_tablestore.client.backoff import REQUEST_RETRY, THROTTLED_REQUEST_RETRY, Backoff
from airflow_tablestore.client.errors import (
    PERMANENT_ERRORS,
    TablestoreError,
    TablestoreNetworkError,
    TablestoreServiceError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

THROTTLING_CODES: frozenset[str] = frozenset({
    "OTSServerBusy",
    "OTSRowOperationConflict",
    "OTSNotEnoughCapacityUnit",
    "OTSTableNotReady",
    "OTSPartitionUnavailable",
    "OTSOperationConflict",
    "OTSOperationThrottled",
    "OTSTunnelServerUnavailable",
})
"""Codes retried for every operation (plus ``OTSQuotaExhausted`` "Too frequent table operations.")."""

QUOTA_RETRY_MESSAGE = "Too frequent table operations."

SERVER_ERROR_CODES: frozenset[str] = frozenset({
    "OTSInternalServerError",
    "OTSServerUnavailable",
    "OTSTimeout",
    "OTSRequestTimeout",
})
"""Codes retried only for idempotent operations (as are any HTTP 5xx, timeouts and connection errors)."""


def _default_sleep(seconds: float) -> None:
    time.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter.

    ``max_attempts`` counts the first try (1 = never retry); ``total_budget_s`` bounds the time spent in one
    call including waits; ``base_delay_s``/``max_delay_s`` shape the backoff (throttling uses
    ``throttle_base_delay_s`` since the service asked to slow down).
    """

    max_attempts: int = 10
    total_budget_s: float = 60.0
    base_delay_s: float = REQUEST_RETRY.base_s
    throttle_base_delay_s: float = THROTTLED_REQUEST_RETRY.base_s
    max_delay_s: float = REQUEST_RETRY.max_s
    sleep: Callable[[float], None] = field(default=_default_sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.total_budget_s < 0 or self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("retry delays and budget must be non-negative")

    @classmethod
    def no_retry(cls) -> RetryPolicy:
        """A policy that tries exactly once."""
        return cls(max_attempts=1)

    # -- classification -----------------------------------------------------------------------------
    @staticmethod
    def is_throttling(error: BaseException) -> bool:
        if not isinstance(error, TablestoreServiceError):
            return False
        if error.code == "OTSQuotaExhausted":
            return error.message.strip() == QUOTA_RETRY_MESSAGE
        return error.code in THROTTLING_CODES

    @staticmethod
    def is_permanent(error: BaseException) -> bool:
        """Whether ``error`` is an answer no retry or reconnect can change (the caller fails at once)."""
        return isinstance(error, PERMANENT_ERRORS)

    def is_retryable(self, error: BaseException, *, idempotent: bool) -> bool:
        """Whether ``error`` may be retried for an operation of the given idempotency."""
        if self.is_throttling(error):
            return True
        if not idempotent:
            return False
        if isinstance(error, TablestoreNetworkError):
            return True
        if isinstance(error, TablestoreServiceError):
            return error.code in SERVER_ERROR_CODES or (error.http_status or 0) >= 500
        return False

    def backoff(self, error: BaseException | None = None) -> Backoff:
        """The back-off after ``error``: exponential with full jitter, slower to start for throttling."""
        throttled = error is not None and self.is_throttling(error)
        base = self.throttle_base_delay_s if throttled else self.base_delay_s
        return Backoff(base_s=base, factor=2.0, jitter=0.0, max_s=self.max_delay_s, full_jitter=True)

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based); full jitter."""
        return self.backoff(error).delay(attempt - 1)

    # -- execution ----------------------------------------------------------------------------------
    def run(self, operation: Callable[[], T], *, idempotent: bool, name: str = "request") -> T:
        """Call ``operation`` until it succeeds, the error is not retryable, or attempts/budget run out."""
        started = self.clock()
        attempt = 1
        while True:
            try:
                return operation()
            except TablestoreError as error:
                if attempt >= self.max_attempts or not self.is_retryable(error, idempotent=idempotent):
                    raise
                wait = self.delay(attempt, error)
                if self.clock() - started + wait > self.total_budget_s:
                    log.warning(
                        "%s failed with %s (request id %s) after %d attempt(s); retry time budget of %.1fs "
                        "exhausted, giving up",
                        name,
                        error.code,
                        error.request_id,
                        attempt,
                        self.total_budget_s,
                    )
                    raise
                log.warning(
                    "%s failed with %s (request id %s, HTTP %s), attempt %d of %d; retrying in %.3fs",
                    name, error.code, error.request_id, error.http_status, attempt, self.max_attempts, wait,
                )
                self.sleep(wait)
                attempt += 1
