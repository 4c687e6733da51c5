"""``ChannelResult``: what one Spark task of a consumer round returns to the driver for its channel.

The one declaration of the round's control row: its Arrow schema (what the task yields) and its Spark DDL (the
``mapInArrow`` output schema) both derive from the dataclass's fields, and the driver reads the collected rows
back through :meth:`ChannelResult.from_row`. A new field is one line here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

_COLUMN_TYPES: dict[type, tuple[pa.DataType, str]] = {
    str: (pa.string(), "string"),
    bool: (pa.bool_(), "boolean"),
    int: (pa.int64(), "long"),
    float: (pa.float64(), "double"),
}
"""Python field type -> (Arrow type, Spark DDL type)."""


@dataclass(frozen=True)
class ChannelResult:
    """One channel's round: where it started and where it stopped (the channel token the driver checkpoints),
    why it stopped, what it read and wrote, and how long each part took. ``error`` is set when a transient
    failure left the channel unread this round (then ``next_token == start_token``)."""

    channel_id: str
    start_token: str
    next_token: str
    finished: bool
    records: int = 0
    bytes: int = 0
    reads: int = 0
    max_sequence_timestamp_us: int | None = None
    reached_cutoff: bool = False
    caught_up: bool = False
    read_seconds: float = 0.0
    sink_seconds: float = 0.0
    task_seconds: float = 0.0
    refused: int = 0
    peak_rss_bytes: int = 0
    error: str | None = None

    ARROW_SCHEMA: ClassVar[pa.Schema]
    DDL: ClassVar[str]

    def to_batch(self) -> pa.RecordBatch:
        """This result as a one-row Arrow batch of :attr:`ARROW_SCHEMA` (what a ``mapInArrow`` task yields)."""
        return pa.RecordBatch.from_pylist([dataclasses.asdict(self)], schema=self.ARROW_SCHEMA)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ChannelResult:
        """A collected control row (a Spark ``Row.asDict()`` or an Arrow ``to_pylist()`` item) as a result."""
        return cls(**{field.name: row[field.name] for field in dataclasses.fields(cls)})


def _columns(cls: type) -> list[tuple[str, pa.DataType, str]]:
    """``(name, Arrow type, DDL type)`` of each field of ``cls``, in order (``X | None`` is a nullable X)."""
    hints = typing.get_type_hints(cls)
    columns = []
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if isinstance(hint, types.UnionType):
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        arrow_type, ddl_type = _COLUMN_TYPES[hint]
        columns.append((field.name, arrow_type, ddl_type))
    return columns


ChannelResult.ARROW_SCHEMA = pa.schema([pa.field(name, arrow_type) for name, arrow_type, _ in _columns(ChannelResult)])
ChannelResult.DDL = ", ".join(f"{name} {ddl_type}" for name, _, ddl_type in _columns(ChannelResult))
