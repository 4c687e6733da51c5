"""Normalisation of the caller's arguments shared by the table API: table names, primary keys, columns.

A primary key is a sequence (or mapping) of ``(name, value)`` pairs in schema order; columns a
``{name: value}`` mapping, :class:`Column` objects or ``(name, value[, ts[, op]])`` tuples. Anything else
raises :class:`TablestoreClientError` naming the bad entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import Column, PrimaryKey

ColumnsArg = Mapping[str, Any] | Iterable[Column | tuple[Any, ...]]
PrimaryKeyArg = Sequence[tuple[str, Any]] | Mapping[str, Any]

TABLE_NAME_RULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
"""Tablestore's rule for table names (``fullmatch``): 1-255 letters, digits and underscores, not starting with a
digit. The service enforces it; callers that want to refuse a name before any request use it."""


def table_name(name: object) -> str:
    """``name`` if it is a non-empty string; raises a clear error otherwise."""
    if not isinstance(name, str) or not name:
        raise TablestoreClientError(f"table name must be a non-empty string, got {name!r}")
    return name


def normalize_primary_key(primary_key: object) -> PrimaryKey:
    """A primary key as a tuple of ``(name, value)`` pairs; raises a clear error for anything else."""
    if isinstance(primary_key, Mapping):
        items: list[Any] = list(primary_key.items())
    elif isinstance(primary_key, str | bytes | bytearray) or not isinstance(primary_key, Iterable):
        raise TablestoreClientError(
            f"primary key must be a sequence of (name, value) pairs in schema order, got {primary_key!r}"
        )
    else:
        items = list(primary_key)
    if not items:
        raise TablestoreClientError("primary key must have at least one (name, value) pair")
    result = []
    for item in items:
        if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 2:
            raise TablestoreClientError(
                f"primary key must be a sequence of (name, value) pairs in schema order; bad entry {item!r}"
            )
        name, value = item
        if not isinstance(name, str) or not name:
            raise TablestoreClientError(f"primary key column names must be non-empty strings, got {name!r}")
        if value is None:
            raise TablestoreClientError(f"primary key column {name!r} has no value")
        result.append((name, value))
    return tuple(result)


def normalize_columns(columns: ColumnsArg | None) -> tuple[Column, ...]:
    """Columns from a ``{name: value}`` mapping, ``Column`` objects or ``(name, value[, ts[, op]])``
    tuples."""
    if columns is None:
        return ()
    if isinstance(columns, Mapping):
        return tuple(Column(str(name), value) for name, value in columns.items())
    if isinstance(columns, str | bytes):
        raise TablestoreClientError("columns must be a mapping or a sequence of Column/(name, value) tuples")
    result = []
    for item in columns:
        if isinstance(item, Column):
            result.append(item)
        elif isinstance(item, tuple) and 1 <= len(item) <= 4 and isinstance(item[0], str):
            result.append(Column(*item))
        else:
            raise TablestoreClientError(
                f"bad column {item!r}: use Column(name, value, timestamp, op) or (name, value)"
            )
    return tuple(result)
