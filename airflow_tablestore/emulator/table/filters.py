"""Column conditions and read filters: parse a serialized ``Filter`` and evaluate it against a row."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from airflow_tablestore.emulator.codec.decode import decode_sql_variant
from airflow_tablestore.emulator.codec.format import PlainBufferError, Special
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.messages import require_utf8
from airflow_tablestore.protocol import ots_filter_pb2 as _filter_pb2

filter_pb2: Any = _filter_pb2  # generated module without type stubs

MAX_CONDITIONS = 10
_CMP: dict[int, Callable[[Any, Any], bool]] = {
    1: operator.eq, 2: operator.ne, 3: operator.gt, 4: operator.ge, 5: operator.lt, 6: operator.le,
}


@dataclass
class Single:
    comparator: int
    column: str
    value: Any
    filter_if_missing: bool
    latest_only: bool


@dataclass
class Composite:
    op: int  # 1 NOT, 2 AND, 3 OR
    subs: list[Any]


@dataclass
class Pagination:
    offset: int
    limit: int


Node = Single | Composite | Pagination


def _kind(v: Any) -> int:
    if isinstance(v, bool):
        return 2
    if isinstance(v, int | float):
        return 0
    if isinstance(v, str):
        return 3
    return 7


def parse_filter(data: bytes, *, for_condition: bool = False) -> Node:
    """Decode a serialized ``Filter`` (400 ``Deserialize filter failed.`` on garbage)."""
    count = [0]
    node = _parse(data, count, for_condition)
    if count[0] > MAX_CONDITIONS:
        raise parameter_invalid(f"The count of filter exceeds the max:{MAX_CONDITIONS}.")
    return node


def _parse(data: bytes, count: list[int], for_condition: bool, depth: int = 0) -> Node:
    # Each nesting level holds at least one condition, so a filter legal by count is never deeper than
    # MAX_CONDITIONS: refuse deeper ones before recursing (Python's stack would end in a 500).
    if depth > MAX_CONDITIONS:
        raise parameter_invalid(f"The count of filter exceeds the max:{MAX_CONDITIONS}.")
    try:
        f = filter_pb2.Filter.FromString(data)
        if f.type == filter_pb2.FT_SINGLE_COLUMN_VALUE:
            s = require_utf8(filter_pb2.SingleColumnValueFilter.FromString(f.filter))
            count[0] += 1
            if s.comparator not in _CMP and s.comparator not in (7, 8):
                raise parameter_invalid(f"Invalid comparator type: {s.comparator}.")
            if s.HasField("value_trans_rule"):
                raise parameter_invalid("Regex value transfer rules are not supported by the emulator.")
            value = (None if s.comparator in (7, 8) and not s.column_value
                     else decode_sql_variant(s.column_value))
            if isinstance(value, Special):
                raise parameter_invalid("Deserialize filter failed.")
            return Single(s.comparator, s.column_name, value, s.filter_if_missing, s.latest_version_only)
        if f.type == filter_pb2.FT_COMPOSITE_COLUMN_VALUE:
            c = filter_pb2.CompositeColumnValueFilter.FromString(f.filter)
            subs = [_parse(sub.SerializeToString(), count, for_condition, depth + 1) for sub in c.sub_filters]
            if c.combinator == 1 and len(subs) != 1:
                raise parameter_invalid("Invalid NOT operator: the number of sub-filters must be 1.")
            if c.combinator in (2, 3) and len(subs) < 2:
                raise parameter_invalid(
                    "Invalid AND/OR operator: the number of sub-filters must be at least 2.")
            if c.combinator not in (1, 2, 3):
                raise parameter_invalid(f"Invalid logical operator: {c.combinator}.")
            return Composite(c.combinator, subs)
        if f.type == filter_pb2.FT_COLUMN_PAGINATION:
            if for_condition:
                raise parameter_invalid("ColumnPaginationFilter is not allowed in a condition.")
            p = filter_pb2.ColumnPaginationFilter.FromString(f.filter)
            if p.offset < 0:
                raise parameter_invalid(
                    "Offset in ColumnPaginationFilter must be greater than or equal to 0.")
            if p.limit <= 0:
                raise parameter_invalid("Limit in ColumnPaginationFilter must be greater than 0.")
            return Pagination(p.offset, p.limit)
        raise parameter_invalid("Deserialize filter failed.")
    except (DecodeError, PlainBufferError, ValueError):
        raise parameter_invalid("Deserialize filter failed.") from None


def evaluate(node: Node, pk: dict[str, Any], cols: dict[str, list[tuple[int, Any]]]) -> bool:
    """True if the row passes. ``cols`` = visible versions (newest first); PK columns can be referenced."""
    if isinstance(node, Single):
        if node.column in pk:
            values = [pk[node.column]]
        else:
            versions = cols.get(node.column)
            values = [] if not versions else [v for _, v in (versions[:1] if node.latest_only else versions)]
        if node.comparator == 7:
            return bool(values)
        if node.comparator == 8:
            return not values
        if not values:
            return not node.filter_if_missing
        cmp = _CMP[node.comparator]
        for v in values:
            if _kind(v) != _kind(node.value):
                if node.comparator == 2:
                    return True
                continue
            if cmp(v, node.value):
                return True
        return False
    if isinstance(node, Composite):
        if node.op == 1:
            return not evaluate(node.subs[0], pk, cols)
        if node.op == 2:
            return all(evaluate(s, pk, cols) for s in node.subs)
        return any(evaluate(s, pk, cols) for s in node.subs)
    return True


def paginate(node: Node, cols: dict[str, list[tuple[int, Any]]]) -> dict[str, list[tuple[int, Any]]]:
    """Apply a top-level ColumnPaginationFilter (skip ``offset`` columns in name order, keep ``limit``)."""
    if not isinstance(node, Pagination):
        return cols
    names = sorted(cols)[node.offset : node.offset + node.limit]
    return {n: cols[n] for n in names}


def check_condition(node: Node | None, pk: dict[str, Any], cols: dict[str, list[tuple[int, Any]]]) -> None:
    """Raise 403 ``OTSConditionCheckFail`` if a column condition fails."""
    if node is not None and not evaluate(node, pk, cols):
        raise condition_failed()


def condition_failed() -> EmulatorError:
    return EmulatorError("OTSConditionCheckFail", "Condition check failed.", 403)
