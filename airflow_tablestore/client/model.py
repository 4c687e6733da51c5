"""The Pythonic data model shared by the table API, the tunnel API, the worker and the Spark job.

Values map to Tablestore types by their Python type: ``int`` is INTEGER, ``float`` DOUBLE, ``bool`` BOOLEAN,
``str`` STRING and ``bytes`` BINARY (unlike the official SDK, where ``bytes`` means STRING). A primary key is
an ordered tuple of ``(name, value)`` pairs in schema order. Rows and columns are NamedTuples: cheap to build
in the hot decode path, immutable, picklable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from airflow_tablestore.client.epoch import ns_to_datetime


class _Sentinel:
    """A named singleton used for the special primary-key values."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


INF_MIN = _Sentinel("INF_MIN")
"""Smaller than every value of a primary-key column (range bounds only)."""
INF_MAX = _Sentinel("INF_MAX")
"""Greater than every value of a primary-key column (range bounds only)."""
AUTO_INCREMENT = _Sentinel("AUTO_INCREMENT")
"""Placeholder for an auto-increment primary-key column in PutRow/UpdateRow."""

PrimaryKeyValue = int | str | bytes | _Sentinel
ColumnValue = int | float | bool | str | bytes
PrimaryKey = tuple[tuple[str, PrimaryKeyValue], ...]


class CellOp(enum.IntEnum):
    """What a column entry does. The values are the PlainBuffer cell-type bytes (PUT has no byte)."""

    PUT = 0
    DELETE_ALL_VERSIONS = 1
    DELETE_ONE_VERSION = 3
    INCREMENT = 4


class Column(NamedTuple):
    """One column entry: a value version (PUT), or a delete of one version or of all versions."""

    name: str
    value: ColumnValue | None = None
    timestamp: int | None = None  # cell version, milliseconds since epoch
    op: CellOp = CellOp.PUT

    @property
    def timestamp_ms(self) -> int | None:
        """The cell version in milliseconds since epoch (``timestamp``, named with its unit)."""
        return self.timestamp


class SequenceInfo(NamedTuple):
    """Position of a stream record: epoch, timestamp in microseconds, index among equal timestamps."""

    epoch: int
    timestamp: int  # microseconds since epoch
    row_index: int

    @property
    def timestamp_us(self) -> int:
        """The commit time in microseconds since epoch (``timestamp``, named with its unit)."""
        return self.timestamp


class Row(NamedTuple):
    """A PlainBuffer row: primary key, columns, the row delete marker and optional stream sequence info."""

    primary_key: PrimaryKey
    columns: tuple[Column, ...] = ()
    delete_marker: bool = False
    sequence: SequenceInfo | None = None

    def get(self, name: str, default: Any = None) -> Any:
        """Value of the newest version of column ``name`` (columns come newest first per name)."""
        for column in self.columns:
            if column.name == name and column.op == CellOp.PUT:
                return column.value
        return default

    def primary_key_dict(self) -> dict[str, PrimaryKeyValue]:
        return dict(self.primary_key)


# ---- table schema ---------------------------------------------------------------------------------


class PrimaryKeyType(enum.StrEnum):
    INTEGER = "INTEGER"
    STRING = "STRING"
    BINARY = "BINARY"


class ColumnType(enum.StrEnum):
    INTEGER = "INTEGER"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    BINARY = "BINARY"


@dataclass(frozen=True)
class PrimaryKeyColumn:
    name: str
    type: PrimaryKeyType
    auto_increment: bool = False


@dataclass(frozen=True)
class DefinedColumn:
    name: str
    type: ColumnType


@dataclass(frozen=True)
class TableOptions:
    """Table options. ``time_to_live`` in seconds (-1 = forever), ``max_time_deviation`` in seconds."""

    time_to_live: int = -1
    max_versions: int = 1
    max_time_deviation: int = 86400
    allow_update: bool = True


MAX_TIME_DEVIATION = (2**63 - 1) // 1_000_000
"""Largest accepted ``max_time_deviation``: lets a replica keep any original cell version."""


@dataclass(frozen=True)
class StreamSpec:
    """Stream settings of a table. ``expiration_hours``: stream log retention (1..168)."""

    enabled: bool
    expiration_hours: int = 168
    columns_to_get: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamDetails:
    enabled: bool
    stream_id: str | None = None
    expiration_hours: int | None = None
    last_enable_time: int | None = None  # microseconds since epoch


@dataclass(frozen=True)
class ReservedThroughput:
    read: int = 0
    write: int = 0


@dataclass(frozen=True)
class TableSchema:
    """What CreateTable needs and DescribeTable returns (plus ``stream``)."""

    name: str
    primary_key: tuple[PrimaryKeyColumn, ...]
    defined_columns: tuple[DefinedColumn, ...] = ()
    options: TableOptions = field(default_factory=TableOptions)
    reserved_throughput: ReservedThroughput = field(default_factory=ReservedThroughput)
    stream: StreamSpec | None = None


@dataclass(frozen=True)
class TableDescription:
    schema: TableSchema
    stream: StreamDetails
    shard_splits: tuple[PrimaryKey, ...] = ()


class SplitLocation(NamedTuple):
    """A run of ``repeat`` consecutive ranges served from ``location`` (a hint; may be empty)."""

    location: str
    repeat: int


@dataclass(frozen=True)
class SplitPoints:
    """What ComputeSplitPointsBySize answers: the table's key split into ranges of about the asked size.

    ``split_points`` are ascending primary-key prefixes (the service omits trailing ``INF_MIN`` columns,
    usually keeping only the first column); ``locations`` run-length encode one location per range, their
    repeats summing to ``len(split_points) + 1``. :meth:`ranges` gives the ranges themselves.
    """

    primary_key: tuple[PrimaryKeyColumn, ...]
    split_points: tuple[PrimaryKey, ...]
    locations: tuple[SplitLocation, ...]

    def ranges(self) -> list[tuple[PrimaryKey, PrimaryKey]]:
        """Contiguous ``(inclusive start, exclusive end)`` keys covering the whole table once, in key order.

        The first starts at ``INF_MIN`` and the last ends at ``INF_MAX`` in every column; each split point is
        padded with ``INF_MIN`` for its missing columns, so it ends one range and starts the next. Pass
        them to ``get_range``/``iter_range``.
        """
        names = [column.name for column in self.primary_key]
        bounds: list[PrimaryKey] = [tuple((name, INF_MIN) for name in names)]
        for point in self.split_points:
            given = dict(point)
            bounds.append(tuple((name, given.get(name, INF_MIN)) for name in names))
        bounds.append(tuple((name, INF_MAX) for name in names))
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def range_locations(self) -> list[str]:
        """The location of each range of :meth:`ranges`, in the same order (the runs expanded)."""
        return [loc.location for loc in self.locations for _ in range(loc.repeat)]


# ---- conditions -----------------------------------------------------------------------------------


class RowExistence(enum.StrEnum):
    IGNORE = "IGNORE"
    EXPECT_EXIST = "EXPECT_EXIST"
    EXPECT_NOT_EXIST = "EXPECT_NOT_EXIST"


class Comparator(enum.StrEnum):
    EQUAL = "EQUAL"
    NOT_EQUAL = "NOT_EQUAL"
    GREATER_THAN = "GREATER_THAN"
    GREATER_EQUAL = "GREATER_EQUAL"
    LESS_THAN = "LESS_THAN"
    LESS_EQUAL = "LESS_EQUAL"
    EXIST = "EXIST"
    NOT_EXIST = "NOT_EXIST"


class LogicalOperator(enum.StrEnum):
    NOT = "NOT"
    AND = "AND"
    OR = "OR"


@dataclass(frozen=True)
class SingleColumnCondition:
    column: str
    comparator: Comparator
    value: ColumnValue | None = None
    pass_if_missing: bool = True
    latest_version_only: bool = True


@dataclass(frozen=True)
class CompositeColumnCondition:
    operator: LogicalOperator
    conditions: tuple[ColumnCondition, ...]


ColumnCondition = SingleColumnCondition | CompositeColumnCondition


@dataclass(frozen=True)
class Condition:
    row_existence: RowExistence = RowExistence.IGNORE
    column_condition: ColumnCondition | None = None


class Direction(enum.StrEnum):
    FORWARD = "FORWARD"
    BACKWARD = "BACKWARD"


@dataclass(frozen=True)
class TimeRange:
    """Cell versions ``[start, end)`` in ms, or exactly ``specific`` ms."""

    start: int | None = None
    end: int | None = None
    specific: int | None = None


# ---- batch writes ---------------------------------------------------------------------------------


class WriteType(enum.StrEnum):
    PUT = "PUT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


@dataclass(frozen=True)
class RowWrite:
    """One row of a batch write. PUT: ``columns`` are the values; UPDATE: columns with their ``op``;
    DELETE: no columns."""

    table: str
    type: WriteType
    primary_key: PrimaryKey
    columns: tuple[Column, ...] = ()
    condition: Condition = field(default_factory=Condition)


@dataclass(frozen=True)
class RowWriteResult:
    """Outcome of one row of a batch write, in request order; ``attempts``: how often it was sent."""

    write: RowWrite
    index: int
    ok: bool
    error: Exception | None = None
    row: Row | None = None
    attempts: int = 1


# ---- tunnel ---------------------------------------------------------------------------------------




class TunnelType(enum.StrEnum):
    BASE_DATA = "BaseData"
    STREAM = "Stream"
    BASE_AND_STREAM = "BaseAndStream"


class TunnelStage(enum.StrEnum):
    INIT = "InitBaseDataAndStreamShard"
    PROCESS_BASE_DATA = "ProcessBaseData"
    PROCESS_STREAM = "ProcessStream"


class ChannelStatus(enum.StrEnum):
    """A channel's place in the tunnel state machine (WAIT → OPEN → CLOSING → CLOSE/TERMINATED)."""

    WAIT = "WAIT"
    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSE = "CLOSE"
    TERMINATED = "TERMINATED"


class ActionType(enum.IntEnum):
    """What a tunnel record does to its row; ``str()`` and f-strings give the name (``PUT_ROW``), as the
    Parquet change log's ``action`` column does, and the value stays the wire's number."""

    PUT_ROW = 1
    UPDATE_ROW = 2
    DELETE_ROW = 3

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


@dataclass(frozen=True)
class TunnelInfo:
    tunnel_id: str
    tunnel_name: str
    table_name: str
    instance_name: str
    tunnel_type: TunnelType
    stage: TunnelStage
    stream_id: str
    expired: bool = False
    create_time_ns: int = 0
    stream_start_ns: int | None = None
    stream_end_ns: int | None = None

    @property
    def create_time(self) -> datetime | None:
        """Creation time as an aware UTC ``datetime``."""
        return ns_to_datetime(self.create_time_ns)


@dataclass(frozen=True)
class ChannelInfo:
    """A channel as DescribeTunnel shows it: type, status, owner and progress (read-only, for monitoring).

    Why its own type: heartbeats exchange only :class:`~airflow_tablestore.client.tunnel.client.Channel`
    triples.
    """

    channel_id: str
    channel_type: str  # "BaseData" | "Stream"
    status: ChannelStatus
    client_id: str | None
    consume_point_ns: int  # 0 = none (base channels)
    row_count: int

    @property
    def consume_point(self) -> datetime | None:
        """The channel consume point as an aware UTC ``datetime`` (None when there is none)."""
        return ns_to_datetime(self.consume_point_ns)


@dataclass(frozen=True)
class TunnelDescription:
    tunnel: TunnelInfo
    channels: tuple[ChannelInfo, ...]
    consume_point_ns: int  # tunnel_rpo: slowest stream channel, 0 = none yet

    @property
    def consume_point(self) -> datetime | None:
        """The tunnel consume point (slowest stream channel) as an aware UTC ``datetime``, or None."""
        return ns_to_datetime(self.consume_point_ns)


class Record(NamedTuple):
    """One change read from a tunnel channel. ``sequence`` is None for base-data records."""

    action: ActionType
    primary_key: PrimaryKey
    columns: tuple[Column, ...]
    sequence: SequenceInfo | None = None
    origin_columns: tuple[Column, ...] | None = None
