"""Data model of the emulator store: table, partition, stream-entry and snapshot views, and stored cells.

Rows' cells are stored compactly as a ``marshal``-ed ``{column: [(ts_ms, value), ...newest first]}`` (all
versions; visibility is decided at read time from the table options, :func:`visible_columns`). Next to them
each row keeps its PlainBuffer encoding (:func:`encode_stored`), which a read copies instead of encoding the
row again whenever that encoding is exactly what it would produce (:data:`USABLE_SQL`). The store's
components (:mod:`.core`, :mod:`.tables`, :mod:`.stream_log`, :mod:`.snapshots`) and its callers share
these types.
"""

from __future__ import annotations

import marshal
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from airflow_tablestore.emulator.codec.encode import encode_row_body, value_payload

Columns = dict[str, list[tuple[int, Any]]]
"""Stored cells of one row: column name → versions ``(ts_ms, value)`` newest first."""

ACTION_PUT = 1
ACTION_UPDATE = 2
ACTION_DELETE = 3
HASH_SPACE = 1 << 32


@dataclass(frozen=True)
class TableInfo:
    """A table's schema, options and stream settings (read-only view of the stored metadata)."""

    name: str
    table_id: int
    pk: tuple[tuple[str, str], ...]  # (name, "INTEGER"|"STRING"|"BINARY") in schema order
    auto_increment: str | None
    defined_columns: tuple[tuple[str, str], ...]
    time_to_live: int
    max_versions: int
    deviation_s: int
    allow_update: bool
    reserved_read: int
    reserved_write: int
    created_s: float
    last_increase_s: int
    last_decrease_s: int | None
    stream_enabled: bool
    stream_id: str | None
    stream_expiration_hours: float
    stream_enabled_us: int
    raw: dict[str, Any] = field(repr=False, compare=False, hash=False)

    @property
    def pk_names(self) -> list[str]:
        return [n for n, _ in self.pk]

    @property
    def pk_types(self) -> list[str]:
        return [t for _, t in self.pk]

    @staticmethod
    def from_meta(meta: dict[str, Any]) -> TableInfo:
        o = meta["options"]
        s = meta.get("stream") or {}
        auto = [p[0] for p in meta["pk"] if len(p) > 2 and p[2]]
        return TableInfo(
            name=meta["name"],
            table_id=meta["tid"],
            pk=tuple((p[0], p[1]) for p in meta["pk"]),
            auto_increment=auto[0] if auto else None,
            defined_columns=tuple((d[0], d[1]) for d in meta.get("defined", [])),
            time_to_live=o["ttl"],
            max_versions=o["max_versions"],
            deviation_s=o["deviation"],
            allow_update=o["allow_update"],
            reserved_read=meta["reserved"][0],
            reserved_write=meta["reserved"][1],
            created_s=meta["created_s"],
            last_increase_s=meta["last_increase"],
            last_decrease_s=meta.get("last_decrease"),
            stream_enabled=bool(s.get("enabled")),
            stream_id=s.get("stream_id"),
            stream_expiration_hours=float(s.get("expiration", 0) or 0),
            stream_enabled_us=int(s.get("enabled_us", 0) or 0),
            raw=meta,
        )


class PartitionInfo(NamedTuple):
    """A stream partition. ``closed`` partitions (split) get no new records; children list it as parent."""

    partition_id: str
    parent_ids: tuple[str, ...]
    closed: bool
    created_seq: int
    closed_seq: int | None = None
    hash_lo: int = 0
    hash_hi: int = HASH_SPACE


class StreamEntry(NamedTuple):
    """One stream-log record; ``record`` is the finished PlainBuffer (header + row + sequence extension)."""

    seq: int
    timestamp_us: int
    action: int
    record: bytes


class SnapshotInfo(NamedTuple):
    """A frozen copy of a table; stream records with ``seq > stream_seq`` are exactly the later changes."""

    snapshot_id: int
    stream_seq: int
    timestamp_us: int


def dump_columns(cols: Columns) -> bytes:
    return marshal.dumps(cols)


def load_columns(data: bytes) -> Columns:
    return marshal.loads(data)  # type: ignore[no-any-return]


def visible_columns(cols: Columns, ttl: int, max_versions: int, now_ms: int) -> Columns:
    """The versions a reader may see: not expired by TTL, at most ``max_versions`` newest per column."""
    out: Columns = {}
    min_ts = (now_ms // 1000 - ttl) * 1000 if ttl > 0 else None
    for name, versions in cols.items():
        vs = versions if min_ts is None else [v for v in versions if v[0] >= min_ts]
        if vs:
            out[name] = vs[:max_versions]
    return out


class StoredEncoding(NamedTuple):
    """A row's PlainBuffer body (no header): every stored version of every column, names sorted, newest version
    first, and what decides when it may stand for a read: the most versions of any column (``versions``) and
    the oldest version's timestamp (``oldest_ms``, None for a row without columns)."""

    body: bytes
    versions: int
    oldest_ms: int | None


def encode_stored(pk: list[tuple[str, Any]], cols: Columns) -> StoredEncoding:
    """The encoding a read of every visible version returns while no version is hidden (see
    :data:`USABLE_SQL`); the same cells, in the same order, as the reads build."""
    cells = [(n, v, None, ts) for n in sorted(cols) for ts, v in cols[n]]
    versions = max((len(vs) for vs in cols.values()), default=0)
    oldest = min((ts for vs in cols.values() for ts, _ in vs), default=None)
    return StoredEncoding(encode_row_body(pk, cells), versions, oldest)


USABLE_SQL = "(rec IS NOT NULL AND nv <= ? AND (? <= 0 OR oldest IS NULL OR oldest >= ?))"
"""Whether a row's stored encoding (columns ``rec``, ``nv``, ``oldest``) equals its cells after
:func:`visible_columns` trimmed to ``max_versions``: no column has more versions and no version has expired.
An SQL condition, so rows that pass cost the reads no Python call; its parameters are :func:`usable_params`."""


def usable_params(ttl: int, max_versions: int, now_ms: int) -> tuple[int, int, int]:
    """The parameters of :data:`USABLE_SQL` for these options at ``now_ms``."""
    return max_versions, ttl, (now_ms // 1000 - ttl) * 1000


def partition_hash(first_pk_value: Any) -> int:
    """Stable 32-bit hash of the first PK column value (selects the stream partition)."""
    return zlib.crc32(value_payload(first_pk_value))
