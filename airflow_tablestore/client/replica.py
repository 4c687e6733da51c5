"""A fenced replica: how its rows are written (the fence) and how they read (the fence column, tombstones).

Every replicated row carries one extra column, the fence (:data:`FENCE_COLUMN` unless ``--fence-column`` names
another), holding the position of the change that last wrote it (:func:`fence_value`: epoch, commit timestamp
and row index as fixed-width hex, so string order is stream order; base data is :data:`BASE_FENCE`, older than
every stream change). Each write is conditional on ``fence < position`` (a missing fence passes), so the server
itself refuses a change that is not newer than what the row holds, atomically per row:

* a replayed round (the same changes again) is refused row by row — replays are no-ops;
* a write held by the network or the server past the client's timeout and executed late, or written by the
  executors of a driver that lost its channels, is refused once a newer change of that row landed.

A DELETE_ROW becomes a *tombstone*: the row is replaced by the fence column alone, its value marked with
:data:`TOMBSTONE_SUFFIX`, so an older change that arrives later still finds the fence and is refused (a plain
delete would let it resurrect the row). Refused writes are counted, not errors.

The writers are the Spark consumer's Tablestore sink (whose fence is the stream position), the tombstone purge
and the ``tablestore`` data source's ``fence_by`` option (whose fence is a user column that orders the writes):
they share :func:`fence_condition`, :func:`fenced_row_write` and :func:`write_fenced`. Every reader of a replica
(the data source, the purge, the replica verifier) skips tombstones and the fence column by :func:`strip_fence`
and :func:`is_tombstone`. Writers and readers live in Spark, Airflow and the verifier command: the rules live
here, in the client, where all of them reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_tablestore.client.errors import BatchWriteError
from airflow_tablestore.client.model import (
    ActionType,
    CellOp,
    Column,
    ColumnValue,
    Comparator,
    Condition,
    PrimaryKey,
    Record,
    RowExistence,
    RowWrite,
    SequenceInfo,
    SingleColumnCondition,
    WriteType,
)

FENCE_COLUMN = "_tunnel_seq"
"""Default name of the fence column (the consumer's ``--fence-column``)."""

TOMBSTONE_SUFFIX = "-deleted"
"""Marks the fence of a deleted row; sorts like its position ("-" is below every hex digit)."""


def strip_fence(columns: tuple[Column, ...], fence_column: str = FENCE_COLUMN) -> tuple[Column, ...]:
    """A replica row's data columns (empty for a tombstone: the source has no such row)."""
    return tuple(c for c in columns if c.name != fence_column)


def is_tombstone(columns: tuple[Column, ...], fence_column: str = FENCE_COLUMN) -> bool:
    """Whether a replica row (its columns as read) is a deleted row's tombstone."""
    fences = [c for c in columns if c.name == fence_column]
    if not fences or len(fences) != len(columns):
        return False
    latest = max(fences, key=lambda c: c.timestamp_ms or 0)
    return isinstance(latest.value, str) and latest.value.endswith(TOMBSTONE_SUFFIX)


BASE_FENCE = "0"
"""Fence of base-data records: below every stream position (``"0" < "00000000..."``)."""

CONDITION_FAILED = "OTSConditionCheckFail"


def fence_value(sequence: SequenceInfo | None) -> str:
    """The fence string of a change: fixed-width hex of (epoch, timestamp µs, row index); base data → "0".

    Per record on the sink path: reads the NamedTuple fields directly (``timestamp`` is µs), not the unit-named
    properties.
    """
    if sequence is None:
        return BASE_FENCE
    return f"{sequence.epoch:08x}{sequence.timestamp:016x}{sequence.row_index:08x}"


def fence_condition(fence_column: str, value: ColumnValue) -> Condition:
    """Apply a write only if the row's fence is older than ``value`` (a row or fence that is missing passes)."""
    return Condition(RowExistence.IGNORE, SingleColumnCondition(fence_column, Comparator.LESS_THAN, value))


def fenced_row_write(table: str, kind: WriteType, primary_key: PrimaryKey, columns: tuple[Column, ...],
                     fence_column: str, value: ColumnValue, *, carries_fence: bool = False) -> RowWrite:
    """A put or update of ``columns`` that lands only if the row's fence is older than ``value``; the write sets
    the fence to ``value`` (``carries_fence``: ``columns`` already hold it, as with a user's ``fence_by``
    column)."""
    cells = columns if carries_fence else (*columns, Column(fence_column, value))
    return RowWrite(table, kind, primary_key, cells, fence_condition(fence_column, value))


def fenced_write(table: str, record: Record, fence_column: str = FENCE_COLUMN) -> RowWrite | None:
    """The conditional write that applies ``record`` only if the row's fence is older; None for an update
    without columns (a no-op)."""
    fence = fence_value(record.sequence)
    action = ActionType(record.action)
    if action is ActionType.DELETE_ROW:  # tombstone: the row becomes the (marked) fence alone
        return RowWrite(table, WriteType.PUT, record.primary_key,
                        (Column(fence_column, fence + TOMBSTONE_SUFFIX),), fence_condition(fence_column, fence))
    if action is ActionType.PUT_ROW:
        columns = tuple(c for c in record.columns if c.op == CellOp.PUT)
        return fenced_row_write(table, WriteType.PUT, record.primary_key, columns, fence_column, fence)
    if not record.columns:
        return None
    return fenced_row_write(table, WriteType.UPDATE, record.primary_key, record.columns, fence_column, fence)


def write_fenced(client: Any, writes: Sequence[RowWrite], **options: Any) -> int:
    """Write fenced ``writes`` through ``client.write_rows`` (legal batches, retries: a fenced write is
    repeatable, its own condition refuses a second application); returns how many the fence refused (the row
    already held that write or a newer one). Raises :class:`BatchWriteError` if any row failed otherwise.
    ``options`` go to ``write_rows`` (``max_batch_rows``...)."""
    if not writes:
        return 0
    try:
        client.write_rows(writes, fenced=True, **options)
    except BatchWriteError as exc:
        if exc.not_attempted or any(getattr(f.error, "code", None) != CONDITION_FAILED for f in exc.failures):
            raise
        return len(exc.failures)
    return 0
