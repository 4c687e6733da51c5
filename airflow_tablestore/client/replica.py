"""How a fenced replica's rows read: the fence column, tombstones, and a row's data as the source holds it.

The Tablestore sink of the Spark consumer (``spark/sinks/``) writes every replicated row with one extra column,
the fence (:data:`FENCE_COLUMN` unless ``--fence-column`` names another), and replaces a deleted row by a
*tombstone*: the fence alone, its value ending in :data:`TOMBSTONE_SUFFIX`. Every reader of a replica (the
``tablestore`` data source, the tombstone purge, the replica verifier) reads them by these rules, so they live
here, in the client, where the writer (Spark) and the readers (Spark, Airflow, the verifier command) all reach.
"""

from __future__ import annotations

from airflow_tablestore.client.model import Column

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
