"""``verify_replica``: a table and its replica compared cell for cell, both streamed in primary-key order.

Both tables are read with GetRange page by page (``page_size`` rows at most, else the service's page) and merged
like two sorted files, so memory holds one page of each, whatever the tables' size. The replica is read as its
readers see it (:mod:`airflow_tablestore.client.replica`): its fence column is not data, and a tombstone is a
deleted row. Cells are compared with their versions (timestamps) and exact types (a BOOLEAN ``True`` is not the
INTEGER ``1``; a DOUBLE is compared by its bits, so ``-0.0`` differs from ``0.0``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import INF_MAX, INF_MIN, PrimaryKey, PrimaryKeyValue, Row, TableDescription
from airflow_tablestore.client.replica import FENCE_COLUMN, is_tombstone, strip_fence
from airflow_tablestore.client.verify.report import DIFFERS, EXTRA, MISSING, Difference, VerifyReport

Cells = dict[str, tuple[tuple[int, tuple[str, Any]], ...]]


class VerifyError(TablestoreClientError):
    """The two tables cannot be compared (their primary keys differ, a bad argument): no retry can fix it."""

    def __init__(self, message: str, code: str = "OTSVerifyInvalid", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


def verify_replica(source: Any, source_table: str, replica: Any, replica_table: str, *,
                   all_versions: bool = False, fence_column: str = FENCE_COLUMN, max_differences: int = 10,
                   page_size: int | None = None) -> VerifyReport:
    """Compare ``source_table`` (read with the ``source`` ``TableClient``) and its replica ``replica_table``
    (``replica``: the same client, or one of another instance) cell for cell.

    ``all_versions``: every kept version of every cell (as many as the tables keep), else the newest only.
    ``fence_column``: the replica's fence column (the consumer's ``--fence-column``), left out of the comparison,
    and its tombstones read as deleted rows; ``""`` for a replica written without a fence. ``max_differences``
    rows that differ are listed in the report (all are counted). Raises :class:`VerifyError` when the primary
    keys differ, and the client's typed errors (a missing table is named) when a read fails.
    """
    if max_differences < 0:
        raise VerifyError(f"max_differences must be 0 or more, got {max_differences}")
    if page_size is not None and page_size <= 0:
        raise VerifyError(f"page_size must be positive, got {page_size}")
    source_description = source.describe_table(source_table)
    replica_description = replica.describe_table(replica_table)
    key_names = _check_keys(source_table, source_description, replica_table, replica_description)
    max_versions = 1
    if all_versions:
        max_versions = max(source_description.schema.options.max_versions,
                           replica_description.schema.options.max_versions)

    pages = {"source": 0, "replica": 0}
    tombstones = 0

    def replica_rows() -> Iterator[Row]:
        nonlocal tombstones
        for row in _scan(replica, replica_table, key_names, max_versions, page_size, pages, "replica"):
            if fence_column and is_tombstone(row.columns, fence_column):
                tombstones += 1
                continue
            yield row

    counts = {MISSING: 0, EXTRA: 0, DIFFERS: 0}
    equal = 0
    differences: list[Difference] = []

    def note(kind: str, primary_key: PrimaryKey, columns: tuple[str, ...] = ()) -> None:
        counts[kind] += 1
        if len(differences) < max_differences:
            differences.append(Difference(kind, primary_key, columns))

    source_iter = _scan(source, source_table, key_names, max_versions, page_size, pages, "source")
    replica_iter = replica_rows()
    src, dst = next(source_iter, None), next(replica_iter, None)
    while src is not None or dst is not None:
        src_key = _key(src) if src is not None else None
        dst_key = _key(dst) if dst is not None else None
        if dst is None or (src is not None and src_key < dst_key):  # type: ignore[operator]
            note(MISSING, src.primary_key)  # type: ignore[union-attr]
            src = next(source_iter, None)
        elif src is None or dst_key < src_key:  # type: ignore[operator]
            note(EXTRA, dst.primary_key)
            dst = next(replica_iter, None)
        else:
            columns = _differing_columns(_cells(src.columns, ""), _cells(dst.columns, fence_column))
            if columns:
                note(DIFFERS, src.primary_key, columns)
            else:
                equal += 1
            src, dst = next(source_iter, None), next(replica_iter, None)

    return VerifyReport(
        source_table=source_table, replica_table=replica_table, versions="all" if all_versions else "newest",
        fence_column=fence_column, rows_compared=equal + sum(counts.values()), equal=equal,
        missing=counts[MISSING], extra=counts[EXTRA], differing=counts[DIFFERS], tombstones=tombstones,
        source_pages=pages["source"], replica_pages=pages["replica"], differences=tuple(differences),
    )


def _check_keys(source_table: str, source: TableDescription, replica_table: str,
                replica: TableDescription) -> tuple[str, ...]:
    """The primary-key column names, once both tables are known to share them (names and types, in order)."""
    source_key = [(c.name, str(c.type)) for c in source.schema.primary_key]
    replica_key = [(c.name, str(c.type)) for c in replica.schema.primary_key]
    if source_key != replica_key:
        raise VerifyError(
            f"the primary keys differ, so {replica_table!r} cannot be a replica of {source_table!r}: "
            f"source {_describe_key(source_key)}, replica {_describe_key(replica_key)}")
    return tuple(name for name, _ in source_key)


def _describe_key(key: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in key) + ")"


def _scan(client: Any, table: str, key_names: tuple[str, ...], max_versions: int, page_size: int | None,
          pages: dict[str, int], side: str) -> Iterator[Row]:
    """Every row of ``table`` in primary-key order, one GetRange page in memory at a time."""
    cursor: PrimaryKey | None = tuple((name, INF_MIN) for name in key_names)
    end = tuple((name, INF_MAX) for name in key_names)
    previous: tuple[PrimaryKeyValue, ...] | None = None
    while cursor is not None:
        rows, cursor = client.get_range(table, cursor, end, limit=page_size, max_versions=max_versions)
        pages[side] += 1
        for row in rows:
            key = _key(row)
            if previous is not None and key <= previous:  # type: ignore[operator]
                raise VerifyError(f"table {table!r} returned primary key {row.primary_key} out of order; "
                                  "a merge of the two tables needs them in primary-key order")
            previous = key
            yield row


def _key(row: Row) -> tuple[PrimaryKeyValue, ...]:
    # INTEGER keys compare as numbers, STRING keys by code point (= UTF-8 byte order), BINARY keys by bytes:
    # Tablestore's order for tables whose keys have the same types, which _check_keys made sure of.
    return tuple(value for _, value in row.primary_key)


def _cells(columns: tuple[Any, ...], fence_column: str) -> Cells:
    """Column name → its cells (version, typed value), newest first; the fence column left out."""
    by_name: dict[str, list[tuple[int, tuple[str, Any]]]] = {}
    for column in strip_fence(columns, fence_column) if fence_column else columns:
        by_name.setdefault(column.name, []).append((column.timestamp or 0, _typed(column.value)))
    return {name: tuple(sorted(cells, key=lambda cell: cell[0], reverse=True)) for name, cells in by_name.items()}


def _typed(value: Any) -> tuple[str, Any]:
    if isinstance(value, float):
        return "float", value.hex()
    return type(value).__name__, value


def _differing_columns(source: Cells, replica: Cells) -> tuple[str, ...]:
    return tuple(sorted(name for name in source.keys() | replica.keys() if source.get(name) != replica.get(name)))
