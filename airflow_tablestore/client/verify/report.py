"""What a replica verification found: the counts and the first differences, as text and as a JSON-able dict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.model import PrimaryKey

MISSING = "missing"
"""A source row the replica does not have (a tombstone counts as not having it)."""
EXTRA = "extra"
"""A replica row the source does not have."""
DIFFERS = "differs"
"""A row both have, with at least one column whose cells (values, versions) differ."""


def format_key(primary_key: PrimaryKey) -> str:
    """``(region='r1', id=7)``: a primary key as its readers write it."""
    return "(" + ", ".join(f"{name}={value!r}" for name, value in primary_key) + ")"


@dataclass(frozen=True)
class Difference:
    """One row that differs: ``kind`` (:data:`MISSING`, :data:`EXTRA` or :data:`DIFFERS`), its primary key and,
    for :data:`DIFFERS`, the columns whose cells differ."""

    kind: str
    primary_key: PrimaryKey
    columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == MISSING:
            return f"missing in the replica: {format_key(self.primary_key)}"
        if self.kind == EXTRA:
            return f"extra in the replica: {format_key(self.primary_key)}"
        return f"differs: {format_key(self.primary_key)} in column(s) {', '.join(self.columns)}"


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`~airflow_tablestore.client.verify.compare.verify_replica`.

    ``rows_compared`` = ``equal`` + ``missing`` + ``extra`` + ``differing`` (every primary key either table
    holds; the replica's tombstones are deleted rows, counted in ``tombstones`` and not as rows);
    ``differences`` holds the first ``max_differences`` of them in primary-key order; ``source_pages`` and
    ``replica_pages`` count the GetRange pages read.
    """

    source_table: str
    replica_table: str
    versions: str  # "all" or "newest"
    fence_column: str
    rows_compared: int
    equal: int
    missing: int
    extra: int
    differing: int
    tombstones: int
    source_pages: int
    replica_pages: int
    differences: tuple[Difference, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the replica equals the source cell for cell."""
        return self.missing == 0 and self.extra == 0 and self.differing == 0

    def summary(self) -> str:
        """One line: the verdict and the counts."""
        verdict = "equal" if self.ok else "DIFFERENT"
        return (f"replica {self.replica_table!r} of {self.source_table!r} is {verdict} ({self.versions} versions): "
                f"{self.rows_compared} rows compared, {self.equal} equal, {self.missing} missing in the replica, "
                f"{self.extra} extra in the replica, {self.differing} differing")

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  {difference}" for difference in self.differences]
        shown = len(self.differences)
        total = self.missing + self.extra + self.differing
        if total > shown:
            lines.append(f"  ... and {total - shown} more")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The counts and the first differences (as text): JSON-serialisable, the operator's XCom value."""
        return {
            "ok": self.ok,
            "source_table": self.source_table,
            "replica_table": self.replica_table,
            "versions": self.versions,
            "fence_column": self.fence_column,
            "rows_compared": self.rows_compared,
            "equal": self.equal,
            "missing": self.missing,
            "extra": self.extra,
            "differing": self.differing,
            "tombstones": self.tombstones,
            "source_pages": self.source_pages,
            "replica_pages": self.replica_pages,
            "differences": [str(d) for d in self.differences],
        }
