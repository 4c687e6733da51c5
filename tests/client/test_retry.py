"""RetryPolicy: classification, backoff bounds, attempt and time budgets, and retries over real HTTP."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_tablestore.client.auth import Credentials
from airflow_tablestore.client.errors import (
    AuthError,
    ConditionFailedError,
    ServerError,
    TablestoreError,
    TablestoreNetworkError,
    ThrottledError,
    error_from_response,
)
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.transport import Transport
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs

class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _err(code: str, status: int, message: str = "m") -> TablestoreError:
    return error_from_response(code, message, status, "rid")


def _policy(fake: FakeTime, **kwargs: float) -> RetryPolicy:
    return RetryPolicy(sleep=fake.sleep, clock=fake.clock, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [
    "OTSServerBusy", "OTSRowOperationConflict", "OTSNotEnoughCapacityUnit", "OTSTableNotReady",
    "OTSPartitionUnavailable", "OTSOperationThrottled", "OTSTunnelServerUnavailable",
])
def test_throttling_codes_retry_for_every_operation(code: str) -> None:
    policy = RetryPolicy()
    error = _err(code, 503)
    assert policy.is_retryable(error, idempotent=False)
    assert policy.is_retryable(error, idempotent=True)


def test_quota_exhausted_retried_only_for_too_frequent_table_operations() -> None:
    policy = RetryPolicy()
    assert policy.is_retryable(
        _err("OTSQuotaExhausted", 403, "Too frequent table operations."), idempotent=False
    )
    assert not policy.is_retryable(_err("OTSQuotaExhausted", 403, "Number of tables exceeded the quota."),
                                   idempotent=True)


@pytest.mark.parametrize(("code", "status"), [
    ("OTSInternalServerError", 500), ("OTSServerUnavailable", 503), ("OTSTimeout", 503), ("Whatever", 502),
])
def test_server_errors_retry_only_when_idempotent(code: str, status: int) -> None:
    policy = RetryPolicy()
    error = _err(code, status)
    assert policy.is_retryable(error, idempotent=True)
    assert not policy.is_retryable(error, idempotent=False)


def test_network_errors_retry_only_when_idempotent() -> None:
    policy = RetryPolicy()
    error = TablestoreNetworkError("connection refused")
    assert policy.is_retryable(error, idempotent=True)
    assert not policy.is_retryable(error, idempotent=False)


@pytest.mark.parametrize(("code", "status"), [
    ("OTSAuthFailed", 403), ("OTSParameterInvalid", 400), ("OTSConditionCheckFail", 403),
    ("OTSObjectNotExist", 404), ("OTSFlowControl", 429),
])
def test_client_side_errors_never_retry(code: str, status: int) -> None:
    assert not RetryPolicy().is_retryable(_err(code, status), idempotent=True)


def test_delay_is_full_jitter_within_exponential_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.1, throttle_base_delay_s=0.5, max_delay_s=2.0)
    server = _err("OTSInternalServerError", 500)
    busy = _err("OTSServerBusy", 503)
    for attempt in range(1, 12):
        cap = min(2.0, 0.1 * 2 ** (attempt - 1))
        assert all(0.0 <= policy.delay(attempt, server) <= cap for _ in range(50))
        assert all(
            0.0 <= policy.delay(attempt, busy) <= min(2.0, 0.5 * 2 ** (attempt - 1)) for _ in range(50)
        )
    # jitter: not a constant
    assert len({policy.delay(5, server) for _ in range(20)}) > 1


def test_attempts_are_bounded() -> None:
    fake = FakeTime()
    calls = []

    def op() -> None:
        calls.append(1)
        raise _err("OTSServerBusy", 503)

    with pytest.raises(ThrottledError):
        _policy(fake, max_attempts=4).run(op, idempotent=False)
    assert len(calls) == 4 and len(fake.sleeps) == 3


def test_total_time_budget_is_honoured() -> None:
    fake = FakeTime()
    calls = []

    def op() -> None:
        calls.append(1)
        raise _err("OTSServerBusy", 503)

    policy = _policy(fake, max_attempts=1000, total_budget_s=5.0, base_delay_s=1.0, throttle_base_delay_s=1.0,
                     max_delay_s=1.0)
    with pytest.raises(ThrottledError):
        policy.run(op, idempotent=True)
    assert fake.now <= 5.0
    assert 1 < len(calls) < 1000


def test_success_after_retries_returns_value_and_logs_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeTime()
    outcomes: list[Exception | None] = [_err("OTSServerBusy", 503), _err("OTSInternalServerError", 500), None]

    def op() -> str:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return "done"

    with caplog.at_level(logging.WARNING, logger="airflow_tablestore.client.retry"):
        assert _policy(fake).run(op, idempotent=True, name="/GetRow") == "done"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "OTSServerBusy" in messages[0] and "rid" in messages[0] and "attempt 1" in messages[0]
    assert "OTSInternalServerError" in messages[1] and "attempt 2" in messages[1]


def test_non_retryable_raises_immediately() -> None:
    fake = FakeTime()
    calls = []

    def op() -> None:
        calls.append(1)
        raise _err("OTSConditionCheckFail", 403)

    with pytest.raises(ConditionFailedError):
        _policy(fake).run(op, idempotent=True)
    assert len(calls) == 1 and fake.sleeps == []


# ---- over real HTTP -------------------------------------------------------------------------------


def _error_body(code: str, message: str = "x") -> bytes:
    return table_pb2.Error(code=code, message=message).SerializeToString()


def _transport(server: Any, fake: FakeTime, attempts: int = 5) -> Transport:
    return Transport(server.endpoint, Credentials("id", "secret"), "inst", timeout=(2, 5),
                     retry=_policy(fake, max_attempts=attempts))


@pytest.mark.parametrize("idempotent", [True, False])
def test_throttled_answer_is_retried_for_any_operation(scripted: Any, idempotent: bool) -> None:
    fake = FakeTime()
    ok = table_pb2.ListTableResponse(table_names=["t"]).SerializeToString()
    scripted.script(
        scripted.Reply(503, _error_body("OTSServerBusy")),
        scripted.Reply(409, _error_body("OTSRowOperationConflict")),
        scripted.Reply(200, ok),
    )
    with _transport(scripted, fake) as transport:
        answer = transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=idempotent)
    assert list(answer.table_names) == ["t"]
    assert len(scripted.requests) == 3


@pytest.mark.parametrize(("idempotent", "expected_attempts"), [(True, 5), (False, 1)])
def test_5xx_retried_only_for_idempotent(scripted: Any, idempotent: bool, expected_attempts: int) -> None:
    fake = FakeTime()
    scripted.script(scripted.Reply(500, _error_body("OTSInternalServerError", "Internal server error.")))
    with _transport(scripted, fake) as transport, pytest.raises(ServerError) as info:
        transport.call("/PutRow", None, table_pb2.PutRowResponse, idempotent=idempotent)
    assert len(scripted.requests) == expected_attempts
    assert info.value.code == "OTSInternalServerError" and info.value.request_id == "req-scripted"


def test_retries_are_re_signed_with_valid_signatures(scripted: Any) -> None:
    from airflow_tablestore.client import auth

    fake = FakeTime()
    scripted.script(scripted.Reply(503, _error_body("OTSServerBusy")), scripted.Reply(200, b""))
    with _transport(scripted, fake) as transport:
        transport.call(
            "/DeleteTable",
            table_pb2.DeleteTableRequest(table_name="t"),
            table_pb2.DeleteTableResponse,
            idempotent=False,
        )
    assert len(scripted.requests) == 2
    for seen in scripted.requests:
        assert seen.headers["x-ots-signature"] == auth.sign_v2("secret", "/DeleteTable", seen.headers)


def test_auth_failure_not_retried(scripted: Any) -> None:
    fake = FakeTime()
    scripted.script(scripted.Reply(403, _error_body("OTSAuthFailed", "Signature mismatch.")))
    with _transport(scripted, fake) as transport, pytest.raises(AuthError):
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert len(scripted.requests) == 1
