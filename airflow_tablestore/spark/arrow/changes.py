"""Tunnel records as sink writes and as Arrow change-log rows (and back).

Two pure conversions used on the executors:

* :func:`record_to_write` — a record as the ``RowWrite`` that replays it on a replica, keeping the original
  cell versions (PUT_ROW → put of every version, UPDATE_ROW → per-column put / delete one version / delete all
  versions, DELETE_ROW → delete).
* :func:`records_to_arrow` / :func:`arrow_to_records` — one change-log row per record: channel, position,
  action, primary key and columns as lists of typed-value structs (exact for every Tablestore type, including
  BINARY), and the stream sequence (null for base data). Values become Arrow through the one shared core,
  :mod:`airflow_tablestore.spark.arrow.values` (the ``tablestore`` data source's too).

:func:`records_to_arrow` takes a :class:`~airflow_tablestore.client.records.Records` batch: where the compiled
PlainBuffer module is in use (``client/plainbuffer/implementation.py``) the table is built straight from the
records' bytes in C, no record decoded (:func:`records_to_arrow_compiled`); anything that path leaves out is
decoded and built from the record objects (:func:`objects_to_arrow`: in C again where it can, else
:func:`objects_to_arrow_python`, the reference of both compiled builders' tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.model import (
    ActionType,
    CellOp,
    Column,
    ColumnType,
    PrimaryKey,
    Record,
    RowWrite,
    SequenceInfo,
    WriteType,
)
from airflow_tablestore.client.plainbuffer.implementation import compiled_module
from airflow_tablestore.client.records import Records
from airflow_tablestore.spark.arrow.values import (
    ARROW_TYPES,
    TypedValues,
    leaf_array,
    normalized,
    value_type,
)

_VALUE_SLOT = {
    ColumnType.INTEGER: "int_value", ColumnType.DOUBLE: "double_value", ColumnType.BOOLEAN: "bool_value",
    ColumnType.STRING: "string_value", ColumnType.BINARY: "binary_value",
}
_VALUE_FIELDS = [
    pa.field("type", pa.string()),
    *(pa.field(_VALUE_SLOT[kind], arrow_type) for kind, arrow_type in ARROW_TYPES.items()),
]
PK_TYPE = pa.struct([pa.field("name", pa.string()), *_VALUE_FIELDS])
COLUMN_TYPE = pa.struct([
    pa.field("name", pa.string()),
    pa.field("op", pa.string()),
    pa.field("timestamp", pa.int64()),  # the cell version, in milliseconds since epoch (Tablestore's unit)
    *_VALUE_FIELDS,
])
CHANGE_SCHEMA = pa.schema([
    pa.field("channel_id", pa.string(), nullable=False),
    pa.field("chunk", pa.string(), nullable=False),  # hash of the start token of the round that read it
    pa.field("record_index", pa.int64(), nullable=False),  # position within the chunk
    pa.field("action", pa.string(), nullable=False),
    pa.field("primary_key", pa.list_(PK_TYPE), nullable=False),
    pa.field("columns", pa.list_(COLUMN_TYPE), nullable=False),
    pa.field("sequence_epoch", pa.int64()),
    pa.field("sequence_timestamp_us", pa.int64()),
    pa.field("sequence_row_index", pa.int64()),
])
"""Arrow/Parquet schema of the change log (one row per record)."""

_WRITE_TYPES = {
    ActionType.PUT_ROW: WriteType.PUT,
    ActionType.UPDATE_ROW: WriteType.UPDATE,
    ActionType.DELETE_ROW: WriteType.DELETE,
}
_OPS = {op.name: op for op in CellOp}
_ACTIONS = {a.name: a for a in ActionType}


def record_to_write(table: str, record: Record) -> RowWrite | None:
    """The write that applies ``record`` to ``table``; None for an update without columns (a no-op)."""
    wtype = _WRITE_TYPES[record.action]
    if wtype is WriteType.DELETE:
        return RowWrite(table=table, type=WriteType.DELETE, primary_key=record.primary_key)
    if wtype is WriteType.PUT:
        columns = tuple(c for c in record.columns if c.op == CellOp.PUT)
        return RowWrite(table=table, type=WriteType.PUT, primary_key=record.primary_key, columns=columns)
    if not record.columns:
        return None
    return RowWrite(table=table, type=WriteType.UPDATE, primary_key=record.primary_key, columns=record.columns)


# ---- Arrow change log -------------------------------------------------------------------------------


def _typed(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": None, "int_value": None, "double_value": None, "bool_value": None,
        "string_value": None, "binary_value": None,
    }
    kind = value_type(value)  # the shared typing rule (spark/arrow/values.py); INF_MIN/INF_MAX raise TypeError
    if kind is not None:
        out["type"], out[_VALUE_SLOT[kind]] = kind.value, normalized(value, kind)
    return out


def _untyped(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind is None:
        return None
    return item[{
        "INTEGER": "int_value", "DOUBLE": "double_value", "BOOLEAN": "bool_value",
        "STRING": "string_value", "BINARY": "binary_value",
    }[kind]]


def record_to_row(record: Record, channel_id: str, chunk: str, index: int) -> dict[str, Any]:
    """One change-log row (a dict matching :data:`CHANGE_SCHEMA`)."""
    pk = []
    for name, value in record.primary_key:
        item = _typed(value)
        item["name"] = name
        pk.append(item)
    columns = []
    for col in record.columns:
        item = _typed(col.value)
        item["name"] = col.name
        item["op"] = CellOp(col.op).name
        item["timestamp"] = col.timestamp  # ms; the field, not the property: once per cell
        columns.append(item)
    seq = record.sequence
    return {
        "channel_id": channel_id,
        "chunk": chunk,
        "record_index": index,
        "action": ActionType(record.action).name,
        "primary_key": pk,
        "columns": columns,
        "sequence_epoch": seq.epoch if seq else None,
        "sequence_timestamp_us": seq.timestamp if seq else None,  # µs
        "sequence_row_index": seq.row_index if seq else None,
    }


_change_log_arrays = getattr(compiled_module(), "change_log_arrays", None)
_change_log_from_bodies = getattr(compiled_module(), "change_log_from_bodies", None)


def records_to_arrow(records: Records, channel_id: str, chunk: str, first_index: int = 0) -> pa.Table:
    """Records as a change-log table, positions numbered from ``first_index``: built straight from the PlainBuffer
    bodies in C where the compiled module is in use (:func:`records_to_arrow_compiled`); else, or for anything that
    path leaves out, the records are decoded (raising exactly what decoding raises) and given to
    :func:`objects_to_arrow`."""
    table = records_to_arrow_compiled(records, channel_id, chunk, first_index)
    if table is not None:
        return table
    return objects_to_arrow(records.decode(), channel_id, chunk, first_index)


def records_to_arrow_compiled(records: Records, channel_id: str, chunk: str, first_index: int = 0) -> pa.Table | None:
    """The straight path of :func:`records_to_arrow`: the table, or None when it does not apply (no compiled
    module, or anything the decoder would refuse in the bodies or origin records, or the Python builder treats
    specially: corrupt bytes, unknown action types, the primary-key sentinels). Origin records are checked, not
    kept (the change log has no place for them)."""
    if _change_log_from_bodies is None:
        return None
    out = _change_log_from_bodies(records.data, records.spans, records.actions, records.origin_spans)
    return None if out is None else _change_log_table(out, channel_id, chunk, first_index)


def objects_to_arrow(records: Sequence[Record], channel_id: str, chunk: str, first_index: int = 0) -> pa.Table:
    """Decoded records as a change-log table: filled in C where the compiled module is in use
    (:func:`objects_to_arrow_compiled`, unless the records hold values only the Python path handles: value
    subclasses, bytes-likes, out-of-range integers...), else by :func:`objects_to_arrow_python`."""
    if _change_log_arrays is not None:
        records = records if isinstance(records, (list, tuple)) else list(records)  # both paths may iterate it
        table = objects_to_arrow_compiled(records, channel_id, chunk, first_index)
        if table is not None:
            return table
    return objects_to_arrow_python(records, channel_id, chunk, first_index)


def _list_of_structs(struct_type: pa.StructType, n: int, offsets: bytes,
                     leaves: Sequence[tuple[int, int, bytes | None, bytes, bytes | None]]) -> pa.Array:
    fields = list(struct_type)
    struct = pa.StructArray.from_arrays([leaf_array(f.type, leaf) for f, leaf in zip(fields, leaves, strict=True)],
                                        fields=fields)
    return pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(offsets)]), struct)


def objects_to_arrow_compiled(records: Sequence[Record], channel_id: str, chunk: str,
                              first_index: int = 0) -> pa.Table | None:
    """:func:`objects_to_arrow` with the leaf buffers filled by the compiled module (no Python object per row or
    cell): the same table, or None when the compiled module is not in use or the records hold values it leaves
    to the Python path."""
    if _change_log_arrays is None:
        return None
    out = _change_log_arrays(records, _ACTION_NAMES, _OP_NAMES)
    return None if out is None else _change_log_table(out, channel_id, chunk, first_index)


def _change_log_table(out: tuple[Any, ...], channel_id: str, chunk: str, first_index: int) -> pa.Table:
    """The change-log table from the compiled module's answer (record count, offsets, leaf buffers)."""
    n, pk_offsets, col_offsets, *leaves = out
    pk_width, col_width = len(PK_TYPE), len(COLUMN_TYPE)
    action, pk_leaves = leaves[0], leaves[1:1 + pk_width]
    col_leaves = leaves[1 + pk_width:1 + pk_width + col_width]
    epochs, stamps, indexes = leaves[1 + pk_width + col_width:]
    arrays = [
        pa.array([channel_id] * n, pa.string()),
        pa.array([chunk] * n, pa.string()),
        pa.array(range(first_index, first_index + n), pa.int64()),
        leaf_array(pa.string(), action),
        _list_of_structs(PK_TYPE, n, pk_offsets, pk_leaves),
        _list_of_structs(COLUMN_TYPE, n, col_offsets, col_leaves),
        leaf_array(pa.int64(), epochs),
        leaf_array(pa.int64(), stamps),
        leaf_array(pa.int64(), indexes),
    ]
    return pa.Table.from_arrays(arrays, schema=CHANGE_SCHEMA)


def objects_to_arrow_python(records: Sequence[Record], channel_id: str, chunk: str,
                            first_index: int = 0) -> pa.Table:
    """:func:`objects_to_arrow` in Python (the path without the compiled module, and the reference of its tests).

    Built column by column (one pass over the records, then one C conversion per leaf field): several
    times faster than ``Table.from_pylist`` of nested dicts on the executors' hot path.
    """
    pk = _ValueColumns(with_cell=False)
    cols = _ValueColumns(with_cell=True)
    pk_offsets = [0]
    col_offsets = [0]
    actions: list[str] = []
    epochs: list[int | None] = []
    stamps: list[int | None] = []
    indexes: list[int | None] = []
    action_names = _ACTION_NAMES
    op_names = _OP_NAMES
    for record in records:
        actions.append(action_names[record.action])
        for name, value in record.primary_key:
            pk.add(name, value)
        pk_offsets.append(len(pk.names))
        for col in record.columns:
            cols.add(col.name, col.value, op_names[col.op], col.timestamp)  # ms (the field, not the property: hot loop)
        col_offsets.append(len(cols.names))
        seq = record.sequence
        if seq is None:
            epochs.append(None)
            stamps.append(None)
            indexes.append(None)
        else:
            epochs.append(seq.epoch)
            stamps.append(seq.timestamp)  # µs
            indexes.append(seq.row_index)
    n = len(actions)
    arrays = [
        pa.array([channel_id] * n, pa.string()),
        pa.array([chunk] * n, pa.string()),
        pa.array(range(first_index, first_index + n), pa.int64()),
        pa.array(actions, pa.string()),
        pa.ListArray.from_arrays(pa.array(pk_offsets, pa.int32()), pk.struct(PK_TYPE)),
        pa.ListArray.from_arrays(pa.array(col_offsets, pa.int32()), cols.struct(COLUMN_TYPE)),
        pa.array(epochs, pa.int64()),
        pa.array(stamps, pa.int64()),
        pa.array(indexes, pa.int64()),
    ]
    return pa.Table.from_arrays(arrays, schema=CHANGE_SCHEMA)


_ACTION_NAMES = {a: a.name for a in ActionType}
_OP_NAMES = {op: op.name for op in CellOp}


class _ValueColumns:
    """Leaf lists of the typed-value struct, filled one value at a time (the values: :class:`TypedValues`)."""

    def __init__(self, *, with_cell: bool) -> None:
        self.with_cell = with_cell
        self.names: list[str] = []
        self.ops: list[str] = []
        self.stamps: list[int | None] = []
        self.values = TypedValues()

    def add(self, name: str, value: Any, op: str = "PUT", timestamp: int | None = None) -> None:
        self.names.append(name)
        if self.with_cell:
            self.ops.append(op)
            self.stamps.append(timestamp)
        self.values.add(value)

    def struct(self, struct_type: pa.StructType) -> pa.StructArray:
        leaves = [pa.array(self.names, pa.string())]
        if self.with_cell:
            leaves += [pa.array(self.ops, pa.string()), pa.array(self.stamps, pa.int64())]
        leaves += self.values.arrays()
        return pa.StructArray.from_arrays(leaves, fields=list(struct_type))


def row_to_record(row: dict[str, Any]) -> Record:
    """Inverse of :func:`record_to_row` (origin columns are not kept in the change log)."""
    pk: PrimaryKey = tuple((item["name"], _untyped(item)) for item in row["primary_key"])
    columns = tuple(
        Column(item["name"], _untyped(item), item["timestamp"], _OPS[item["op"]]) for item in row["columns"]
    )
    seq = None
    if row.get("sequence_timestamp_us") is not None:
        seq = SequenceInfo(int(row["sequence_epoch"]), int(row["sequence_timestamp_us"]),
                           int(row["sequence_row_index"]))
    return Record(_ACTIONS[row["action"]], pk, columns, seq)


def arrow_to_records(table: pa.Table) -> list[Record]:
    """All records of a change-log table, in row order."""
    return [row_to_record(row) for row in table.to_pylist()]


def iter_record_batches(records: Iterable[Record], channel_id: str, chunk: str,
                        batch_rows: int = 10_000) -> Iterable[pa.RecordBatch]:
    """Records as change-log record batches of at most ``batch_rows`` rows."""
    buffer: list[Record] = []
    index = 0
    for record in records:
        buffer.append(record)
        if len(buffer) >= batch_rows:
            yield from objects_to_arrow(buffer, channel_id, chunk, index).to_batches()
            index += len(buffer)
            buffer = []
    if buffer:
        yield from objects_to_arrow(buffer, channel_id, chunk, index).to_batches()
