"""The row condition the row sensor and its trigger share: does a row exist, or does a column hold a value?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.model import Row


@dataclass(frozen=True)
class RowCheck:
    """What to wait for: the row ``primary_key`` of ``table_name`` exists and, with ``column``, that column's
    newest value is ``expected`` (or one of them, for a list). JSON-serialisable (the trigger carries it)."""

    table_name: str
    primary_key: tuple[tuple[str, Any], ...]
    column: str | None = None
    expected: tuple[Any, ...] | None = None

    @classmethod
    def build(cls, table_name: str, primary_key: Sequence[Sequence[Any]] | dict[str, Any], column: str | None,
              expected: Any) -> RowCheck:
        """Checked arguments: a ValueError says what is wrong (the task fails at once)."""
        items = list(primary_key.items()) if isinstance(primary_key, dict) else [tuple(p) for p in primary_key]
        if not items or any(len(item) != 2 or not isinstance(item[0], str) for item in items):
            raise ValueError(f"primary_key must be {{name: value}} or [(name, value), ...], got {primary_key!r}")
        for name, value in items:
            if not isinstance(value, (int, str)) or isinstance(value, bool):
                raise ValueError(f"primary-key column {name!r}: the sensor takes INTEGER and STRING values, got "
                                 f"{type(value).__name__} {value!r}")
        if column is not None and (not isinstance(column, str) or not column):
            raise ValueError(f"column must be a non-empty column name (or None: the row's existence), got {column!r}")
        if expected is not None and column is None:
            raise ValueError("expected needs column: the column whose value to wait for")
        values = None if expected is None else tuple(expected) if isinstance(expected, (list, tuple, set)) \
            else (expected,)
        return cls(table_name, tuple((str(n), v) for n, v in items), column, values)

    def as_dict(self) -> dict[str, Any]:
        return {"table_name": self.table_name, "primary_key": [list(item) for item in self.primary_key],
                "column": self.column, "expected": None if self.expected is None else list(self.expected)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RowCheck:
        expected = data.get("expected")
        return cls(data["table_name"], tuple((str(n), v) for n, v in data["primary_key"]), data.get("column"),
                   None if expected is None else tuple(expected))

    def met(self, row: Row | None) -> tuple[bool, str]:
        """Whether ``row`` (None: absent) meets the condition, and a line saying what was found."""
        key = ", ".join(f"{n}={v!r}" for n, v in self.primary_key)
        if row is None:
            return False, f"row ({key}) of {self.table_name!r} does not exist yet"
        if self.column is None:
            return True, f"row ({key}) of {self.table_name!r} exists"
        value = row.get(self.column)
        if self.expected is None:
            return value is not None, f"row ({key}) column {self.column!r} is {value!r}"
        done = value in self.expected
        wanted = self.expected[0] if len(self.expected) == 1 else list(self.expected)
        return done, f"row ({key}) column {self.column!r} is {value!r} (waiting for {wanted!r})"
