"""Spark's pushed filters -> primary-key ranges and a Tablestore column filter, each exactly or as a superset.

:func:`plan_pushdown` splits the filters Spark offers (``pushFilters``, an AND of them) three ways:

* **key ranges** — ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=``, ``IS NOT NULL`` and (STRING) ``LIKE 'abc%'`` on the
  first primary-key column, and on each next one while the columns before it are pinned to values (``=`` or
  ``IN``), become the key ranges read (intersected with the splits). Exact: primary-key cells always exist and
  have the table's type, and Tablestore orders keys as Spark compares them (signed integers; strings and
  binaries by unsigned bytes), so Spark does not apply them again.
* **a column filter** — comparisons of an attribute column with a literal of the column's type become one
  Tablestore filter (an AND, at most 10 conditions, ``pass_if_missing=False``: a missing cell is null, which
  fails every comparison in Spark too). For STRING, BINARY and BOOLEAN columns ``=``, ``IN``, ``<``, ``<=``,
  ``>``, ``>=`` (and ``IS NOT NULL`` next to one of them) are exact. The rest are pushed only as a *superset*
  and Spark applies them again: INTEGER (the server may compare a DOUBLE cell with an integer), DOUBLE ``=``,
  ``<``, ``<=`` (NaN; ``>``/``>=`` are not pushed, as Spark orders NaN above every number; nor is any DOUBLE
  comparison with ``0.0`` or ``-0.0``, as the service's ``-0.0 = 0.0`` is not assumed) and ``<>`` / ``NOT
  IN`` (a cell of another type passes the server but is null in Spark).
* **left to Spark** — everything else: ``IS NULL`` on attribute columns (a cell of another type is null in
  Spark but present for the server), ``LIKE`` on attribute columns, filters on versioned columns, the corrupt-
  record column or nested fields, literals of another type.

The invariant that makes results equal a run with pushdown off: the server never drops a row that Spark would
keep; a filter is dropped from Spark's list only when the server's answer is provably the same.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ColumnCondition,
    ColumnType,
    Comparator,
    CompositeColumnCondition,
    LogicalOperator,
    PrimaryKey,
    PrimaryKeyColumn,
    SingleColumnCondition,
)
from airflow_tablestore.spark.arrow.values import CELL, KEY, OutputField, normalized, value_type

MAX_CONDITIONS = 10
"""Tablestore's limit on the conditions of one filter."""
MAX_KEY_RANGES = 1000
"""At most this many key ranges from ``IN`` lists (their product over key columns); past it, fewer columns."""
MAX_INT = 2**63 - 1

KeyRange = tuple[PrimaryKey, PrimaryKey]
_COMPARATORS = {
    EqualTo: Comparator.EQUAL, EqualNullSafe: Comparator.EQUAL, GreaterThan: Comparator.GREATER_THAN,
    GreaterThanOrEqual: Comparator.GREATER_EQUAL, LessThan: Comparator.LESS_THAN,
    LessThanOrEqual: Comparator.LESS_EQUAL,
}
_EXACT_TYPES = (ColumnType.STRING, ColumnType.BINARY, ColumnType.BOOLEAN)


@dataclass
class Pushdown:
    """What :func:`plan_pushdown` decided: ranges to read (None: the whole table), a column filter, which
    filters the server applies (``pushed``, as text for ``explain``) and which Spark must still apply."""

    ranges: list[KeyRange] | None = None
    column_filter: ColumnCondition | None = None
    pushed: list[str] = field(default_factory=list)
    remaining: list[Filter] = field(default_factory=list)


def literal(value: Any, kind: ColumnType) -> tuple[bool, Any]:
    """``(True, the value as Tablestore holds it)`` if a Spark literal is of type ``kind`` (the shared mapping,
    :func:`~airflow_tablestore.spark.arrow.values.value_type`; an INTEGER within 64 bits), else ``(False, None)``."""
    try:
        found = value_type(value)
    except TypeError:  # Decimal, datetime, ...: no Tablestore type
        return False, None
    if found is not kind or (kind is ColumnType.INTEGER and not -MAX_INT - 1 <= value <= MAX_INT):
        return False, None
    return True, normalized(value, kind)


def successor(value: Any, kind: ColumnType) -> Any:
    """The smallest key value above ``value`` (INF_MAX when there is none)."""
    if kind is ColumnType.INTEGER:
        return value + 1 if value < MAX_INT else INF_MAX
    return value + ("\x00" if kind is ColumnType.STRING else b"\x00")


def prefix_end(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (None: no such string)."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i])
        if code < 0x10FFFF:
            code += 1
            if 0xD800 <= code <= 0xDFFF:  # surrogates are not text
                code = 0xE000
            return prefix[:i] + chr(code)
    return None


def _order(value: Any) -> tuple[Any, ...]:
    if value is INF_MIN:
        return (0,)
    if value is INF_MAX:
        return (2,)
    return (1, value)


def key_order(key: PrimaryKey) -> tuple[tuple[Any, ...], ...]:
    """A sort key comparing primary keys (with INF_MIN/INF_MAX) as Tablestore orders them."""
    return tuple(_order(value) for _, value in key)


def intersect(a: KeyRange, b: KeyRange) -> KeyRange | None:
    """The part two ``[start, end)`` key ranges share, or None."""
    start = max(a[0], b[0], key=key_order)
    end = min(a[1], b[1], key=key_order)
    return (start, end) if key_order(start) < key_order(end) else None


@dataclass
class _KeyColumn:
    """The constraints the filters put on one primary-key column."""

    column: PrimaryKeyColumn
    points: set[Any] | None = None
    low: tuple[Any, bool] | None = None  # (value, inclusive)
    high: tuple[Any, bool] | None = None
    empty: bool = False
    filters: list[Filter] = field(default_factory=list)

    @property
    def kind(self) -> ColumnType:
        return ColumnType(self.column.type.value)

    def constrained(self) -> bool:
        return self.empty or self.points is not None or self.low is not None or self.high is not None

    def above_low(self, value: Any) -> bool:
        return self.low is None or value > self.low[0] or (self.low[1] and value == self.low[0])

    def below_high(self, value: Any) -> bool:
        return self.high is None or value < self.high[0] or (self.high[1] and value == self.high[0])

    def raise_low(self, value: Any, inclusive: bool) -> None:
        if self.low is None or value > self.low[0] or (value == self.low[0] and not inclusive):
            self.low = (value, inclusive)

    def lower_high(self, value: Any, inclusive: bool) -> None:
        if self.high is None or value < self.high[0] or (value == self.high[0] and not inclusive):
            self.high = (value, inclusive)

    def add(self, flt: Filter) -> bool:
        """Take ``flt`` into the constraints; False if it cannot be expressed on the key."""
        kind = self.kind
        if isinstance(flt, IsNull) or isinstance(flt, EqualNullSafe) and flt.value is None:
            self.empty = True  # key cells are never null
        elif isinstance(flt, EqualTo | EqualNullSafe | In):
            raw = flt.value if isinstance(flt, In) else (flt.value,)
            values = set()
            for item in raw:
                if item is None:
                    continue  # x IN (.., NULL) is never true for it
                ok, value = literal(item, kind)
                if not ok:
                    return False
                values.add(value)
            self.points = values if self.points is None else self.points & values
        elif isinstance(flt, GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
            ok, value = literal(flt.value, kind)
            if not ok:
                return False
            inclusive = isinstance(flt, GreaterThanOrEqual | LessThanOrEqual)
            if isinstance(flt, GreaterThan | GreaterThanOrEqual):
                self.raise_low(value, inclusive)
            else:
                self.lower_high(value, inclusive)
        elif isinstance(flt, StringStartsWith) and kind is ColumnType.STRING and type(flt.value) is str:
            self.raise_low(flt.value, True)
            end = prefix_end(flt.value)
            if end is not None:
                self.lower_high(end, False)
        else:
            return False
        self.filters.append(flt)
        return True

    def bounds(self) -> list[tuple[Any, Any]]:
        """``[(start value inclusive, end value exclusive)]`` on this column (INF_MIN/INF_MAX when open)."""
        if self.empty:
            return []
        if self.points is not None:
            return [(v, successor(v, self.kind)) for v in sorted(self.points)
                    if self.above_low(v) and self.below_high(v)]
        start: Any = INF_MIN
        if self.low is not None:
            start = self.low[0] if self.low[1] else successor(self.low[0], self.kind)
        end: Any = INF_MAX
        if self.high is not None:
            end = successor(self.high[0], self.kind) if self.high[1] else self.high[0]
        if start is INF_MAX or (end is not INF_MAX and start is not INF_MIN and start >= end):
            return []
        return [(start, end)]


def _key_ranges(columns: list[_KeyColumn]) -> tuple[list[KeyRange] | None, list[Filter]]:
    """Key ranges from the constraints, and the filters they express exactly (None: no constraint used)."""
    used: list[_KeyColumn] = []
    combos = 1
    for column in columns:
        if not column.constrained():
            break
        points = column.points is not None and not column.empty
        count = len(column.bounds()) if points else 1
        if combos * max(count, 1) > MAX_KEY_RANGES:
            break
        used.append(column)
        combos *= max(count, 1)
        if not points:
            break  # an interval (or nothing): later columns cannot narrow a range of several values
    if not used:
        return None, []
    names = [c.column.name for c in columns]
    pinned, last = used[:-1], used[-1]
    ranges: list[KeyRange] = []
    pinned_values = [[start for start, _ in c.bounds()] for c in pinned]
    for prefix in itertools.product(*pinned_values):
        for start, end in last.bounds():
            rest = len(columns) - len(used)
            start_key = (*prefix, start, *([INF_MIN] * rest))
            end_key = (*prefix, end, *([INF_MIN] * rest))
            ranges.append((tuple(zip(names, start_key, strict=True)), tuple(zip(names, end_key, strict=True))))
    ranges.sort(key=lambda r: key_order(r[0]))
    return ranges, [f for c in used for f in c.filters]


def _unsure_double(value: Any, kind: ColumnType) -> bool:
    """Whether the server may compare this DOUBLE literal unlike Spark: NaN (Spark orders it above every number)
    and ±0.0 (Spark's -0.0 = 0.0 is not assumed of the service)."""
    return kind is ColumnType.DOUBLE and (math.isnan(value) or value == 0.0)


def _condition(flt: Filter, kinds: dict[str, ColumnType]) -> tuple[list[SingleColumnCondition], bool] | None:
    """The server conditions (ANDed) that pass every row ``flt`` passes, and whether they are exact."""
    negated = isinstance(flt, Not)
    inner = flt.child if isinstance(flt, Not) else flt
    attribute: tuple[str, ...] = getattr(inner, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in kinds:
        return None
    name, kind = attribute[0], kinds[attribute[0]]

    def single(comparator: Comparator, value: Any) -> SingleColumnCondition:
        return SingleColumnCondition(name, comparator, value, pass_if_missing=False)

    if negated:
        raw = inner.value if isinstance(inner, In) else (getattr(inner, "value", None),)
        if not isinstance(inner, EqualTo | In):
            return None
        values = []
        for item in raw:
            ok, value = literal(item, kind)
            if not ok or _unsure_double(value, kind):
                return None
            values.append(value)
        return [single(Comparator.NOT_EQUAL, v) for v in dict.fromkeys(values)], False
    if isinstance(inner, EqualTo | EqualNullSafe | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
        ok, value = literal(inner.value, kind)
        if not ok:
            return None
        comparator = _COMPARATORS[type(inner)]
        if kind is ColumnType.DOUBLE and (_unsure_double(value, kind) or comparator in (
                Comparator.GREATER_THAN, Comparator.GREATER_EQUAL)):
            return None
        return [single(comparator, value)], kind in _EXACT_TYPES
    if isinstance(inner, In):
        values = []
        for item in inner.value:
            if item is None:
                continue
            ok, value = literal(item, kind)
            if not ok or _unsure_double(value, kind):
                return None
            values.append(value)
        if not values:
            return None
        return [single(Comparator.EQUAL, v) for v in dict.fromkeys(values)], kind in _EXACT_TYPES
    return None


def _combine(groups: list[list[SingleColumnCondition]], ors: list[bool]) -> ColumnCondition | None:
    parts: list[ColumnCondition] = []
    for conditions, is_or in zip(groups, ors, strict=True):
        if len(conditions) == 1:
            parts.append(conditions[0])
        else:
            parts.append(CompositeColumnCondition(LogicalOperator.OR if is_or else LogicalOperator.AND,
                                                  tuple(conditions)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else CompositeColumnCondition(LogicalOperator.AND, tuple(parts))


def plan_pushdown(filters: Sequence[Filter], primary_key: Sequence[PrimaryKeyColumn],
                  fields: Sequence[OutputField]) -> Pushdown:
    """Split ``filters`` into key ranges, a column filter and the filters Spark still applies."""
    plan = Pushdown()
    key_fields = {f.name for f in fields if f.source == KEY}
    columns = [_KeyColumn(pk) for pk in primary_key]
    by_name = {c.column.name: c for c in columns if c.column.name in key_fields}
    on_key: list[Filter] = []
    rest: list[Filter] = []
    for flt in filters:
        attribute: tuple[str, ...] = getattr(flt, "attribute", ())
        column = by_name.get(attribute[0]) if len(attribute) == 1 else None
        if column is not None and isinstance(flt, IsNotNull):
            plan.pushed.append(f"{flt!r} (always true of a key column)")
        elif column is not None and column.add(flt):
            on_key.append(flt)
        else:
            rest.append(flt)
    plan.ranges, exact_on_key = _key_ranges(columns)
    exact_ids = {id(f) for f in exact_on_key}
    plan.remaining += [f for f in on_key if id(f) not in exact_ids]
    plan.pushed += [f"{f!r} (key range)" for f in exact_on_key]
    kinds = {f.name: f.type for f in fields if f.source == CELL and f.type is not None}
    candidates = []
    for flt in rest:
        found = _condition(flt, kinds)
        if found is None:
            plan.remaining.append(flt)
        else:
            candidates.append((flt, *found))
    candidates.sort(key=lambda c: not c[2])  # exact ones first: they save Spark the work too
    groups: list[list[SingleColumnCondition]] = []
    ors: list[bool] = []
    exact_columns: set[str] = set()
    budget = MAX_CONDITIONS
    for flt, conditions, exact in candidates:
        if len(conditions) > budget:
            plan.remaining.append(flt)
            continue
        budget -= len(conditions)
        groups.append(conditions)
        ors.append(not isinstance(flt, Not))  # IN: any value; NOT IN: none of them
        plan.pushed.append(f"{flt!r} (column filter{'' if exact else ', Spark checks again'})")
        if exact:
            exact_columns.add(conditions[0].column)
        else:
            plan.remaining.append(flt)
    plan.column_filter = _combine(groups, ors)
    # IS NOT NULL next to an exact, null-rejecting filter of the same column is implied by it
    final = []
    for flt in plan.remaining:
        attribute = getattr(flt, "attribute", ())
        if isinstance(flt, IsNotNull) and len(attribute) == 1 and attribute[0] in exact_columns:
            plan.pushed.append(f"{flt!r} (implied by the column filter)")
            continue
        final.append(flt)
    plan.remaining = final
    return plan
