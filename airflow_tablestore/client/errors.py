"""One exception hierarchy for everything the client can raise.

Every error carries the Tablestore error ``code``, a human ``message``, the ``http_status`` (``None`` for
errors raised locally) and the ``request_id`` the service gave (``None`` when no response arrived). Use
:func:`error_from_response` to turn a service answer into the most specific subclass.

Secrets never appear here: messages are built from codes, names and server text only.
"""

from __future__ import annotations

CLIENT_ERROR = "OTSClientError"


class TablestoreError(Exception):
    """Base class of every Tablestore error raised by ``airflow_tablestore``."""

    def __init__(
        self,
        code: str,
        message: str,
        http_status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.http_status = http_status
        self.request_id = request_id
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.http_status is not None:
            where.append(f"HTTP {self.http_status}")
        if self.request_id:
            where.append(f"request id {self.request_id}")
        suffix = f" ({', '.join(where)})" if where else ""
        return f"{self.code}: {self.message}{suffix}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"http_status={self.http_status!r}, request_id={self.request_id!r})"
        )

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Picklable (Spark ships exceptions between executors and the driver).
        return (type(self), (self.code, self.message, self.http_status, self.request_id))


# ---- raised locally, before or instead of a service answer ----------------------------------------


class TablestoreClientError(TablestoreError):
    """Invalid input or an answer the client cannot accept (bad checksum, MD5 mismatch, ...)."""

    def __init__(self, message: str, code: str = CLIENT_ERROR, http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(code, message, http_status, request_id)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # its arguments come message first (a client error's code is usually the default)
        return (type(self), (self.message, self.code, self.http_status, self.request_id))


class PlainBufferError(TablestoreClientError):
    """PlainBuffer bytes that are truncated, malformed or fail a CRC-8 check."""

    def __init__(self, message: str, code: str = "OTSPlainBufferCorrupt", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


class TablestoreNetworkError(TablestoreClientError):
    """The endpoint could not be reached, or the connection broke or timed out."""

    def __init__(self, message: str, code: str = "OTSNetworkError", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


class BatchWriteError(TablestoreClientError):
    """Some rows of a batch write failed even after retries; ``failures`` lists every one of them.

    ``written`` counts the rows that were written; ``not_attempted`` the rows never sent because writing
    stopped early (a whole batch request failed).
    """

    def __init__(self, message: str, failures: list | None = None,  # type: ignore[type-arg]
                 written: int = 0, not_attempted: int = 0) -> None:
        super().__init__(message, code="OTSBatchWritePartialFailure")
        self.failures = failures or []
        self.written = written
        self.not_attempted = not_attempted

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.message, self.failures, self.written, self.not_attempted))


# ---- answered by the service ----------------------------------------------------------------------


class TablestoreServiceError(TablestoreError):
    """The service (or the emulator) answered with an error."""


class AuthError(TablestoreServiceError):
    """Signature, AccessKey, STS token, clock skew or permission problem (not retried)."""


class InvalidParameterError(TablestoreServiceError):
    """A request parameter was rejected (``OTSParameterInvalid``, ``OTSInvalidPK``, ...)."""


class NotFoundError(TablestoreServiceError):
    """The table, stream or tunnel does not exist."""


class TunnelNotFoundError(NotFoundError, InvalidParameterError):
    """The tunnel does not exist (the service answers ``OTSParameterInvalid`` "tunnel not exist")."""


class StreamNotEnabledError(InvalidParameterError):
    """A Stream or BaseAndStream tunnel was asked for on a table whose stream is off; the message names the fix."""


class AlreadyExistsError(TablestoreServiceError):
    """The table or tunnel already exists."""


class ConditionFailedError(TablestoreServiceError):
    """A row-existence or column condition did not hold; nothing was written."""


class ThrottledError(TablestoreServiceError):
    """The service asked to slow down; always safe to retry."""


class ServerError(TablestoreServiceError):
    """Internal error or unavailability on the service side (5xx)."""


class TunnelExpiredError(TablestoreServiceError):
    """The tunnel's stream position fell out of the stream log retention: delete and recreate it."""


class ResourceGoneError(TablestoreServiceError):
    """The tunnel client is unknown or timed out, or the channel is no longer owned by it (HTTP 410)."""


class SequenceNumberMismatchError(TablestoreServiceError):
    """A checkpoint's sequence number is not newer than the stored one."""


class TrimmedDataError(TablestoreServiceError):
    """The stream data requested was already trimmed by the retention."""


PERMANENT_ERRORS: tuple[type[TablestoreError], ...] = (
    AuthError, InvalidParameterError, NotFoundError, TunnelExpiredError, TrimmedDataError,
)
"""Service errors no retry can fix: credentials or permissions, bad parameters, missing or expired objects.
Throttling, timeouts, 5xx and network errors are not here: they are worth another try."""


def is_transient(error: BaseException) -> bool:
    """True for a failure another attempt may not meet: network errors, throttling, timeouts and 5xx, and a
    :class:`BatchWriteError` whose every failed row (or aborted request) failed that way."""
    if isinstance(error, BatchWriteError):
        causes = [f.error for f in error.failures if getattr(f, "error", None) is not None]
        if isinstance(error.__cause__, BaseException):
            causes.append(error.__cause__)
        return bool(causes) and all(is_transient(cause) for cause in causes)
    return isinstance(error, TablestoreNetworkError | ThrottledError | ServerError)


_CODE_CLASSES: dict[str, type[TablestoreServiceError]] = {
    "OTSAuthFailed": AuthError,
    "OTSNoPermissionAccess": AuthError,
    "OTSPermissionDenied": AuthError,
    "OTSParameterInvalid": InvalidParameterError,
    "OTSInvalidPK": InvalidParameterError,
    "OTSOutOfColumnCountLimit": InvalidParameterError,
    "OTSOutOfRowSizeLimit": InvalidParameterError,
    "OTSRequestBodyTooLarge": InvalidParameterError,
    "OTSMethodNotAllowed": InvalidParameterError,
    "OTSObjectNotExist": NotFoundError,
    "OTSObjectAlreadyExist": AlreadyExistsError,
    "OTSTunnelExist": AlreadyExistsError,
    "OTSConditionCheckFail": ConditionFailedError,
    "OTSServerBusy": ThrottledError,
    "OTSRowOperationConflict": ThrottledError,
    "OTSNotEnoughCapacityUnit": ThrottledError,
    "OTSCapacityUnitExhausted": ThrottledError,
    "OTSTableNotReady": ThrottledError,
    "OTSPartitionUnavailable": ThrottledError,
    "OTSOperationConflict": ThrottledError,
    "OTSOperationThrottled": ThrottledError,
    "OTSFlowControl": ThrottledError,
    "OTSQuotaExhausted": ThrottledError,
    "OTSInternalServerError": ServerError,
    "OTSServerUnavailable": ServerError,
    "OTSTimeout": ServerError,
    "OTSRequestTimeout": ServerError,
    "OTSTunnelServerUnavailable": ServerError,
    "OTSTunnelExpired": TunnelExpiredError,
    "OTSResourceGone": ResourceGoneError,
    "OTSSequenceNumberNotMatch": SequenceNumberMismatchError,
    "OTSTrimmedDataAccess": TrimmedDataError,
}


def error_from_response(
    code: str, message: str, http_status: int | None, request_id: str | None
) -> TablestoreServiceError:
    """Build the most specific exception for a service error answer."""
    if code == "OTSParameterInvalid" and "tunnel not exist" in message.lower():
        return TunnelNotFoundError(code, message, http_status, request_id)
    if code == "OTSQuotaExhausted" and message.strip() != "Too frequent table operations.":
        return TablestoreServiceError(code, message, http_status, request_id)
    cls = _CODE_CLASSES.get(code)
    if cls is None:
        cls = ServerError if http_status is not None and http_status >= 500 else TablestoreServiceError
    return cls(code, message, http_status, request_id)
