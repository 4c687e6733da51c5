"""Turn errors that no retry can fix into ``AirflowFailException``, so the task fails at once instead of
waiting through its retries for the same answer (the table, tunnel, replication-plan, rebuild and Spark-submit
operators and ``TablestoreTunnelConsumePointSensor`` use it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.client.errors import PERMANENT_ERRORS

#: Also permanent: a malformed connection or argument (``SettingsError`` is a ``ValueError``) and
#: a table that exists with another schema.
_FINAL: tuple[type[Exception], ...] = (*PERMANENT_ERRORS, ValueError)


@contextmanager
def fail_fast(*also: type[Exception]) -> Iterator[None]:
    """Inside the block, permanent Tablestore errors (and ``also``) become ``AirflowFailException`` with the
    same message; throttling, timeouts, 5xx and network errors pass through and are retried as usual."""
    try:
        yield
    except (*_FINAL, *also) as exc:
        raise AirflowFailException(f"{exc} (not retried: retrying cannot fix this)") from exc
