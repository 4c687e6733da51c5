"""The one back-off rule and its per-use presets (pure unit tests)."""

from __future__ import annotations

import pytest

from airflow_tablestore.client.backoff import (
    EMPTY_READ,
    FAILED_ROUND,
    NEW_TABLE_WRITE,
    PROCESSOR_RETRY,
    REQUEST_RETRY,
    THROTTLED_REQUEST_RETRY,
    Backoff,
    spread,
)
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.stream.config import StreamWorkerConfig
from airflow_tablestore.client.tunnel.config import TunnelWorkerConfig


def test_exponential_then_capped_without_jitter() -> None:
    backoff = Backoff(base_s=0.1, factor=2.0, jitter=0.0, max_s=1.0)
    assert [round(backoff.delay(n), 6) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(10_000) == 1.0  # the exponent is capped, no overflow


def test_full_jitter_stays_below_the_ceiling_and_varies() -> None:
    delays = [REQUEST_RETRY.delay(3) for _ in range(200)]
    assert all(0.0 <= d <= 0.8 for d in delays)
    assert len(set(delays)) > 1


def test_symmetric_jitter_stays_within_the_fraction() -> None:
    delays = [EMPTY_READ.delay(1) for _ in range(200)]
    assert all(0.1 * 0.75 <= d <= 0.1 * 1.25 for d in delays)


@pytest.mark.parametrize("kwargs", [{"base_s": -1}, {"factor": 0.5}, {"jitter": 1.5}])
def test_invalid_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_every_user_takes_its_preset() -> None:
    policy = RetryPolicy()
    assert policy.backoff() == REQUEST_RETRY
    assert THROTTLED_REQUEST_RETRY.base_s == policy.throttle_base_delay_s
    assert TunnelWorkerConfig().empty_read_backoff == EMPTY_READ
    low, high = StreamWorkerConfig().processor_retry_s
    assert (PROCESSOR_RETRY.base_s, PROCESSOR_RETRY.max_s) == (low, high)


def test_spark_presets_match_the_delays_they_replaced() -> None:
    assert [NEW_TABLE_WRITE.delay(n) for n in range(4)] == [0.5, 1.0, 1.5, 2.0]  # the position table's wait
    assert [FAILED_ROUND.delay(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_spread_stays_in_its_range() -> None:
    delays = [spread(0.5, 2.0) for _ in range(200)]
    assert all(0.5 <= d <= 2.0 for d in delays) and len(set(delays)) > 1


def test_request_and_worker_presets_keep_the_numbers_they_replaced() -> None:
    # The defaults RetryPolicy, the tunnel worker and the stream worker had before they came from these
    # presets.
    assert (REQUEST_RETRY.base_s, REQUEST_RETRY.factor, REQUEST_RETRY.max_s, REQUEST_RETRY.full_jitter) == (
        0.1,
        2.0,
        3.0,
        True,
    )
    assert (THROTTLED_REQUEST_RETRY.base_s, THROTTLED_REQUEST_RETRY.max_s) == (0.3, 3.0)
    assert (EMPTY_READ.base_s, EMPTY_READ.factor, EMPTY_READ.jitter, EMPTY_READ.max_s) == (
        0.02,
        5.0,
        0.25,
        5.0,
    )
    assert [PROCESSOR_RETRY.delay(n) for n in range(9)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]
