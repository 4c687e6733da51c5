"""Epoch time: the one conversion between datetimes, ISO-8601 text and nanoseconds since the epoch.

Tablestore speaks nanoseconds in the Tunnel Service (stream start/end, consume points), microseconds in stream
records (``sequence_timestamp_us``) and milliseconds in cell versions (``timestamp_ms``). Everything that
turns a user's time value into nanoseconds goes through here; naive datetimes are UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_tablestore.client.errors import TablestoreClientError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NS_PER_S = 1_000_000_000

_MAGNITUDES = ((1e11, NS_PER_S), (1e14, 1_000_000), (1e17, 1_000))
"""Epoch numbers below each limit are read as seconds, milliseconds, microseconds; larger ones as ns."""


def datetime_to_ns(value: datetime) -> int:
    """Exact nanoseconds since epoch of a datetime (naive = UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * NS_PER_S + delta.microseconds * 1_000


def ns_to_datetime(ns: int | None) -> datetime | None:
    """Aware UTC ``datetime`` (µs precision) from nanoseconds since epoch; 0/None → None."""
    if not ns:
        return None
    return EPOCH + timedelta(microseconds=ns // 1_000)


def us_to_datetime(us: int) -> datetime:
    """Aware UTC ``datetime`` of microseconds since epoch (stream commit times), exact."""
    return EPOCH + timedelta(microseconds=us)


def datetime_to_us(value: datetime) -> int:
    """Exact microseconds since epoch of a datetime (naive = UTC)."""
    return datetime_to_ns(value) // 1_000


def ns_to_iso(ns: int) -> str | None:
    """ISO-8601 UTC rendering of nanoseconds since epoch (None for 0)."""
    moment = ns_to_datetime(ns)
    return moment.isoformat() if moment is not None else None


def to_ns(value: datetime | int | None) -> int:
    """Nanoseconds since epoch from a ``datetime`` (naive = UTC) or an ``int`` already in ns; None → 0."""
    if value is None:
        return 0
    if isinstance(value, datetime):
        return datetime_to_ns(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TablestoreClientError(f"expected a datetime or non-negative int nanoseconds, got {value!r}")
    return value


TIME_FORMS = "an ISO-8601 time (2026-11-25T10:00:00Z) or epoch seconds/ms/us/ns"
"""What a time argument may be, as every error about one says it."""


class TimeArgumentError(ValueError):
    """A time argument (a cutoff, a stream start or end) that is not a time; no retry can fix it."""


def parse_time_argument(argument: str, value: datetime | str | int | float) -> int:
    """:func:`parse_epoch_ns` of a caller's argument; a :class:`TimeArgumentError` in the one form every time
    argument's error takes: ``cutoff '25/11/2026 10:00' is not a time: give an ISO-8601 time (...) or ...``."""
    try:
        return parse_epoch_ns(value)
    except TablestoreClientError:
        raise TimeArgumentError(f"{argument} {value!r} is not a time: give {TIME_FORMS}") from None


def parse_epoch_ns(value: datetime | str | int | float | None) -> int:
    """Nanoseconds since epoch from a datetime (naive = UTC), an ISO-8601 string or an epoch number.

    Numbers are read by magnitude: seconds (< 1e11), milliseconds (< 1e14), microseconds (< 1e17), else ns.
    """
    if value is None:
        raise TablestoreClientError("time value is not set")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise TablestoreClientError(f"time value {text!r} is neither ISO-8601 nor a number") from None
    if isinstance(value, datetime):
        return datetime_to_ns(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TablestoreClientError(
            f"time value must be a datetime, ISO-8601 string or epoch number, got {value!r}"
        )
    for limit, factor in _MAGNITUDES:
        if value < limit:
            return int(value * factor)
    return int(value)
