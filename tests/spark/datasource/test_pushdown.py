"""Spark filters -> key ranges and a column filter: what is pushed, what is exact, what Spark applies again."""

from __future__ import annotations

from typing import Any

import pytest
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
    StringContains,
    StringStartsWith,
)

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ColumnType,
    Comparator,
    CompositeColumnCondition,
    LogicalOperator,
    PrimaryKeyColumn,
    PrimaryKeyType,
    SingleColumnCondition,
)
from airflow_tablestore.spark.arrow.values import CELL, KEY, VERSIONS, OutputField
from airflow_tablestore.spark.datasource.pushdown import (
    MAX_CONDITIONS,
    intersect,
    plan_pushdown,
    prefix_end,
)
from airflow_tablestore.spark.datasource.reader import split_partitions

PK = (PrimaryKeyColumn("a", PrimaryKeyType.INTEGER), PrimaryKeyColumn("b", PrimaryKeyType.STRING))
FIELDS = [OutputField("a", KEY, ColumnType.INTEGER, 0), OutputField("b", KEY, ColumnType.STRING, 1),
          OutputField("i", CELL, ColumnType.INTEGER), OutputField("d", CELL, ColumnType.DOUBLE),
          OutputField("s", CELL, ColumnType.STRING), OutputField("x", CELL, ColumnType.BINARY),
          OutputField("f", CELL, ColumnType.BOOLEAN), OutputField("v", VERSIONS, ColumnType.STRING)]


def _key(a: Any, b: Any) -> tuple[tuple[str, Any], ...]:
    return (("a", a), ("b", b))


def _plan(*filters: Filter) -> Any:
    return plan_pushdown(list(filters), PK, FIELDS)


def test_equality_on_the_first_key_column_is_one_exact_range() -> None:
    plan = _plan(EqualTo(("a",), 5))
    assert plan.ranges == [(_key(5, INF_MIN), _key(6, INF_MIN))]
    assert plan.remaining == [] and plan.column_filter is None


def test_in_and_comparisons_intersect_on_the_key() -> None:
    plan = _plan(In(("a",), (1, 5, 9, None)), GreaterThan(("a",), 1), LessThanOrEqual(("a",), 9))
    assert plan.ranges == [(_key(5, INF_MIN), _key(6, INF_MIN)), (_key(9, INF_MIN), _key(10, INF_MIN))]
    assert plan.remaining == []


def test_a_pinned_first_column_lets_the_second_narrow_the_range() -> None:
    plan = _plan(EqualTo(("a",), 3), GreaterThanOrEqual(("b",), "m"), LessThan(("b",), "p"))
    assert plan.ranges == [(_key(3, "m"), _key(3, "p"))]
    assert plan.remaining == []


def test_the_second_key_column_alone_is_left_to_spark() -> None:
    flt = EqualTo(("b",), "x")
    plan = _plan(flt)
    assert plan.ranges is None and plan.remaining == [flt]


def test_open_and_closed_bounds() -> None:
    assert _plan(GreaterThan(("a",), 3)).ranges == [(_key(4, INF_MIN), _key(INF_MAX, INF_MIN))]
    assert _plan(LessThan(("a",), 3)).ranges == [(_key(INF_MIN, INF_MIN), _key(3, INF_MIN))]
    assert _plan(LessThanOrEqual(("a",), 2**63 - 1)).ranges == [(_key(INF_MIN, INF_MIN), _key(INF_MAX, INF_MIN))]
    assert _plan(GreaterThan(("a",), 2**63 - 1)).ranges == []
    assert _plan(GreaterThan(("a",), 5), LessThan(("a",), 5)).ranges == []
    assert _plan(IsNull(("a",))).ranges == []


def test_key_prefix_like_becomes_a_range() -> None:
    plan = _plan(EqualTo(("a",), 1), StringStartsWith(("b",), "ab"))
    assert plan.ranges == [(_key(1, "ab"), _key(1, "ac"))] and plan.remaining == []
    assert prefix_end("a\U0010ffff") == "b" and prefix_end("\ud7ff") == "\ue000" and prefix_end("") is None


def test_key_is_not_null_is_always_true() -> None:
    plan = _plan(IsNotNull(("a",)), IsNotNull(("b",)))
    assert plan.ranges is None and plan.remaining == []


def test_exact_attribute_comparisons_leave_nothing_to_spark() -> None:
    plan = _plan(EqualTo(("s",), "x"), IsNotNull(("s",)), GreaterThan(("x",), b"\x01"), EqualTo(("f",), True))
    assert plan.remaining == []
    assert plan.column_filter == CompositeColumnCondition(LogicalOperator.AND, (
        SingleColumnCondition("s", Comparator.EQUAL, "x", pass_if_missing=False),
        SingleColumnCondition("x", Comparator.GREATER_THAN, b"\x01", pass_if_missing=False),
        SingleColumnCondition("f", Comparator.EQUAL, True, pass_if_missing=False)))


def test_integer_double_and_not_equal_are_pushed_but_checked_again() -> None:
    filters = [EqualTo(("i",), 3), LessThan(("d",), 2.5), Not(EqualTo(("s",), "x")), Not(In(("s",), ("a", "b")))]
    plan = _plan(*filters)
    assert plan.remaining == filters
    assert isinstance(plan.column_filter, CompositeColumnCondition)
    conditions = plan.column_filter.conditions
    assert conditions[2] == SingleColumnCondition("s", Comparator.NOT_EQUAL, "x", pass_if_missing=False)
    assert conditions[3] == CompositeColumnCondition(LogicalOperator.AND, (
        SingleColumnCondition("s", Comparator.NOT_EQUAL, "a", pass_if_missing=False),
        SingleColumnCondition("s", Comparator.NOT_EQUAL, "b", pass_if_missing=False)))


@pytest.mark.parametrize("flt", [
    GreaterThan(("d",), 1.0), GreaterThanOrEqual(("d",), 1.0), EqualTo(("d",), float("nan")),  # NaN orders high
    IsNull(("s",)), EqualNullSafe(("s",), None), StringContains(("s",), "x"), StringStartsWith(("s",), "x"),
    EqualTo(("i",), "3"), EqualTo(("s",), 3), EqualTo(("v",), "x"), EqualTo(("nested", "field"), 1),
    Not(EqualTo(("s",), None)), Not(GreaterThan(("i",), 1)),
])
def test_filters_the_server_could_evaluate_differently_are_not_pushed(flt: Filter) -> None:
    plan = _plan(flt)
    assert plan.remaining == [flt] and plan.column_filter is None and plan.ranges is None


@pytest.mark.parametrize("flt", [
    EqualTo(("d",), 0.0), EqualTo(("d",), -0.0), EqualNullSafe(("d",), -0.0), LessThan(("d",), 0.0),
    LessThanOrEqual(("d",), -0.0), In(("d",), (2.5, -0.0)), In(("d",), (0.0, None)), Not(EqualTo(("d",), 0.0)),
    Not(In(("d",), (1.5, -0.0))),
])
def test_double_comparisons_with_zero_of_either_sign_are_not_pushed(flt: Filter) -> None:
    """Spark's -0.0 = 0.0 is not assumed of the service: a comparison with a zero stays with Spark alone."""
    plan = _plan(flt)
    assert plan.remaining == [flt] and plan.column_filter is None and plan.pushed == []
    nonzero = _plan(In(("d",), (2.5, -1e-300)))  # tiny, but not zero: pushed (and checked again)
    assert nonzero.column_filter is not None and len(nonzero.remaining) == 1


def test_in_becomes_an_or_and_the_condition_budget_is_kept() -> None:
    plan = _plan(In(("s",), ("a", "b", None)))
    assert plan.column_filter == CompositeColumnCondition(LogicalOperator.OR, (
        SingleColumnCondition("s", Comparator.EQUAL, "a", pass_if_missing=False),
        SingleColumnCondition("s", Comparator.EQUAL, "b", pass_if_missing=False)))
    many = In(("s",), tuple(f"v{i}" for i in range(MAX_CONDITIONS + 1)))
    exact = EqualTo(("s",), "v1")
    plan = _plan(many, exact)
    assert plan.remaining == [many]
    assert plan.column_filter == SingleColumnCondition("s", Comparator.EQUAL, "v1", pass_if_missing=False)


def test_splits_are_intersected_with_key_ranges_and_capped() -> None:
    splits = [(_key(INF_MIN, INF_MIN), _key(10, INF_MIN)), (_key(10, INF_MIN), _key(20, INF_MIN)),
              (_key(20, INF_MIN), _key(INF_MAX, INF_MAX))]
    wanted = [(_key(5, INF_MIN), _key(6, INF_MIN)), (_key(25, INF_MIN), _key(26, INF_MIN))]
    parts = split_partitions(splits, wanted, 100)
    assert [p.ranges for p in parts] == [(wanted[0],), (wanted[1],)]
    assert [len(p.ranges) for p in split_partitions(splits, None, 2)] == [1, 2]
    assert intersect(splits[0], splits[1]) is None
