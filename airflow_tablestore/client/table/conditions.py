"""Row conditions and column filters → protobuf (``Condition`` and serialized ``Filter`` bytes).

The same ``Filter`` serves write conditions (a failing condition rejects the write with
``OTSConditionCheckFail``) and read filters (a failing filter omits the row). ``pass_if_missing`` is sent as
``filter_if_missing = not pass_if_missing``, as the official SDKs do.
"""

from __future__ import annotations

from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import (
    ColumnCondition,
    Comparator,
    CompositeColumnCondition,
    Condition,
    LogicalOperator,
    RowExistence,
    SingleColumnCondition,
)
from airflow_tablestore.client.plainbuffer.sqlvariant import encode_sql_variant
from airflow_tablestore.protocol import ots_filter_pb2 as _filter_pb2
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

filter_pb2: Any = _filter_pb2  # generated code has no type stubs
table_pb2: Any = _table_pb2

_COMPARATORS = {
    Comparator.EQUAL: 1,
    Comparator.NOT_EQUAL: 2,
    Comparator.GREATER_THAN: 3,
    Comparator.GREATER_EQUAL: 4,
    Comparator.LESS_THAN: 5,
    Comparator.LESS_EQUAL: 6,
    Comparator.EXIST: 7,
    Comparator.NOT_EXIST: 8,
}
_OPERATORS = {LogicalOperator.NOT: 1, LogicalOperator.AND: 2, LogicalOperator.OR: 3}
_EXISTENCE = {RowExistence.IGNORE: 0, RowExistence.EXPECT_EXIST: 1, RowExistence.EXPECT_NOT_EXIST: 2}
_VT_NULL = b"\x06"

FT_SINGLE_COLUMN_VALUE = 1
FT_COMPOSITE_COLUMN_VALUE = 2


def _filter_message(condition: ColumnCondition) -> Any:
    if isinstance(condition, SingleColumnCondition):
        if not isinstance(condition.column, str) or not condition.column:
            raise TablestoreClientError(f"a column condition needs a column name, got {condition.column!r}")
        comparator = Comparator(condition.comparator)
        if condition.value is None:
            if comparator not in (Comparator.EXIST, Comparator.NOT_EXIST):
                raise TablestoreClientError(
                    f"condition on column {condition.column!r}: {comparator.value} needs a value"
                )
            value = _VT_NULL
        else:
            value = encode_sql_variant(condition.value)
        single = filter_pb2.SingleColumnValueFilter(
            comparator=_COMPARATORS[comparator],
            column_name=condition.column,
            column_value=value,
            filter_if_missing=not condition.pass_if_missing,
            latest_version_only=condition.latest_version_only,
        )
        return filter_pb2.Filter(type=FT_SINGLE_COLUMN_VALUE, filter=single.SerializeToString())
    if isinstance(condition, CompositeColumnCondition):
        if not condition.conditions:
            raise TablestoreClientError(
                f"a {LogicalOperator(condition.operator).value} condition needs sub-conditions"
            )
        composite = filter_pb2.CompositeColumnValueFilter(
            combinator=_OPERATORS[LogicalOperator(condition.operator)]
        )
        for sub in condition.conditions:
            composite.sub_filters.append(_filter_message(sub))
        return filter_pb2.Filter(type=FT_COMPOSITE_COLUMN_VALUE, filter=composite.SerializeToString())
    raise TablestoreClientError(
        f"expected SingleColumnCondition or CompositeColumnCondition, got {type(condition).__name__}"
    )


def encode_filter(condition: ColumnCondition) -> bytes:
    """Serialized ``Filter`` bytes for a column condition or read filter."""
    return bytes(_filter_message(condition).SerializeToString())


def condition_to_pb(condition: Condition | None) -> Any:
    """The protobuf ``Condition`` (``IGNORE`` when ``condition`` is None)."""
    if condition is None:
        return table_pb2.Condition(row_existence=0)
    if not isinstance(condition, Condition):
        raise TablestoreClientError(f"condition must be a Condition, got {type(condition).__name__}")
    message = table_pb2.Condition(row_existence=_EXISTENCE[RowExistence(condition.row_existence)])
    if condition.column_condition is not None:
        message.column_condition = encode_filter(condition.column_condition)
    return message
