"""Turn errors that no retry can fix into ``AirflowFailException``, so the task fails at once instead of
waiting through its retries for the same answer (the table, tunnel, replication-plan, rebuild and Spark-submit
operators and ``TablestoreTunnelConsumePointSensor`` use it), and the argument checks whose ``ValueError`` does
so: in a constructor the DAG file does not import; inside :func:`fail_fast` the task fails without retries."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.client.errors import PERMANENT_ERRORS

#: Also permanent: a malformed connection or argument (``TablestoreConnectionError`` is a ``ValueError``) and
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


TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
"""Tablestore's rule for table names."""


def check_table_name(argument: str, value: Any) -> None:
    """A ValueError naming ``argument`` unless ``value`` is a valid table name."""
    if not isinstance(value, str) or not TABLE_NAME.fullmatch(value):
        raise ValueError(f"{argument} {value!r} is not a Tablestore table name: 1-255 letters, digits and "
                         "underscores, starting with a letter or underscore")


def check_non_empty(argument: str, value: Any, what: str = "a non-empty string") -> None:
    """A ValueError naming ``argument`` unless ``value`` is a string with more than blanks."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{argument} must be {what}, got {value!r}")


def check_choice(argument: str, value: Any, choices: Collection[str]) -> None:
    """A ValueError naming ``argument`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{argument} {value!r} is not one of {', '.join(choices)}")


def check_positive(argument: str, value: Any, *, integer: bool = False) -> None:
    """A ValueError naming ``argument`` unless ``value`` is a positive number (an int with ``integer``)."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        raise ValueError(f"{argument} must be a positive {'integer' if integer else 'number'}, got {value!r}")
