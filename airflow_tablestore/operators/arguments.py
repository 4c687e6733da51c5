"""The argument checks of the operators and sensors: a ``ValueError`` in one line naming the argument and what is
valid. In a constructor it fails the DAG file's import (the DAG is not loaded); inside
:func:`~airflow_tablestore.operators.failures.fail_fast` (templated arguments, after rendering) the task fails
without retries."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from airflow_tablestore.client.table.arguments import TABLE_NAME_RULE


def check_table_name(argument: str, value: Any) -> None:
    """A ValueError naming ``argument`` unless ``value`` is a valid table name."""
    if not isinstance(value, str) or not TABLE_NAME_RULE.fullmatch(value):
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
