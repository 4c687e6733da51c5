"""Tablestore values and rows -> Arrow: the one conversion the data source and the consumer's change log share.

Every Tablestore value maps to one Python type and one Arrow type, exactly: INTEGER ``int`` ``int64``, DOUBLE
``float`` ``float64``, BOOLEAN ``bool`` ``bool``, STRING ``str`` ``string``, BINARY ``bytes`` ``binary``
(:data:`ARROW_TYPES`, :func:`value_type`). Two shapes are built from it, column by column (one Python pass
over the rows, then one C conversion per column; never a Python object per output row):

* :class:`TypedValues` — values of *any* type as a type name plus one leaf per type: the consumer's change log
  (``spark/arrow/changes.py``) stores every cell this way;
* :class:`RowsToArrow` — rows (``client.model.Row``) as a ``RecordBatch`` of a fixed schema: primary-key
  columns, the newest version of attribute columns, or all versions as ``list<struct<timestamp, value>>``
  newest first; the ``tablestore`` data source yields these. A cell whose type does not fit its column is
  null plus a description in the corrupt-record column (``PERMISSIVE``) or a :class:`CellTypeError` naming the
  row key, the column and both types (``FAILFAST``). :meth:`RowsToArrow.page` builds it from a GetRange page
  (:class:`~airflow_tablestore.client.plainbuffer.rows.Rows`), :meth:`RowsToArrow.changes` the streaming source's
  flat batch from tunnel records (:class:`~airflow_tablestore.client.records.Records`), :meth:`RowsToArrow.batch`
  from decoded rows.

Where the compiled PlainBuffer module is in use (``client/plainbuffer/implementation.py``: its Arrow builders are
part of that one extension), the batches are filled in C, straight from the PlainBuffer bytes (no row decoded);
anything that path leaves out (a cell that does not fit its column, corrupt bytes) is decoded and built by the
Python path, which raises what decoding raises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import CellOp, ColumnType, PrimaryKey, Row
from airflow_tablestore.client.plainbuffer.implementation import compiled_module
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.records import Records
from airflow_tablestore.client.replica import TOMBSTONE_SUFFIX, is_tombstone

ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.DOUBLE: pa.float64(),
    ColumnType.BOOLEAN: pa.bool_(),
    ColumnType.STRING: pa.string(),
    ColumnType.BINARY: pa.binary(),
}
"""Each Tablestore type's Arrow type (and, in this order, the leaves of :class:`TypedValues`)."""

_EXACT: dict[type, ColumnType] = {
    bool: ColumnType.BOOLEAN, int: ColumnType.INTEGER, float: ColumnType.DOUBLE, str: ColumnType.STRING,
    bytes: ColumnType.BINARY,
}
_PYTHON_TYPE: dict[ColumnType, type] = {kind: cls for cls, kind in _EXACT.items()}
_LEAF_OF: dict[type, tuple[str | None, int]] = {
    type(None): (None, -1), **{cls: (kind.value, list(ARROW_TYPES).index(kind)) for cls, kind in _EXACT.items()}}
"""Exact Python type -> (type name, leaf index) in :class:`TypedValues`."""


def value_type(value: Any) -> ColumnType | None:
    """The Tablestore type of a Python value (None for None); ``TypeError`` for anything else (INF_MIN, ...)."""
    if value is None:
        return None
    kind = _EXACT.get(type(value))
    if kind is not None:
        return kind
    for cls in (bool, int, float, str):  # subclasses; bool before int, as True is an int
        if isinstance(value, cls):
            return _EXACT[cls]
    if isinstance(value, bytes | bytearray | memoryview):
        return ColumnType.BINARY
    raise TypeError(f"unsupported value {value!r} in a Tablestore row")


def normalized(value: Any, kind: ColumnType) -> Any:
    """``value`` as the exact Python type of ``kind`` (a bytearray or memoryview as bytes, a subclass as base)."""
    cls = _PYTHON_TYPE[kind]
    return value if type(value) is cls else cls(value)


class TypedValues:
    """Values of any Tablestore type as leaves: the type name, then one leaf per type in :data:`ARROW_TYPES`
    order, holding the value in its type's leaf and null in the others."""

    __slots__ = ("types", "leaves")

    def __init__(self) -> None:
        self.types: list[str | None] = []
        self.leaves: tuple[list[Any], ...] = tuple([] for _ in ARROW_TYPES)

    def add(self, value: Any) -> None:
        fast = _LEAF_OF.get(type(value))
        if fast is None:
            kind = value_type(value)  # a subclass or a bytes-like (raises for unsupported values)
            assert kind is not None
            value = normalized(value, kind)
            fast = _LEAF_OF[type(value)]
        name, slot = fast
        ints, doubles, bools, strings, binaries = self.leaves  # unrolled: the consumer's hot path
        self.types.append(name)
        ints.append(value if slot == 0 else None)
        doubles.append(value if slot == 1 else None)
        bools.append(value if slot == 2 else None)
        strings.append(value if slot == 3 else None)
        binaries.append(value if slot == 4 else None)

    def arrays(self) -> list[pa.Array]:
        """``[type, int, double, bool, string, binary]`` arrays, one entry per value added."""
        return [pa.array(self.types, pa.string()),
                *(pa.array(leaf, arrow_type) for leaf, arrow_type in zip(self.leaves, ARROW_TYPES.values(),
                                                                          strict=True))]


# ---- rows of a table as record batches ---------------------------------------------------------------------

_flat_arrays = getattr(compiled_module(), "flat_arrays", None)
_flat_from_rows = getattr(compiled_module(), "flat_from_rows", None)
_flat_from_records = getattr(compiled_module(), "flat_from_records", None)
_FLAT_KINDS = {ColumnType.INTEGER: (0, pa.int64()), ColumnType.DOUBLE: (1, pa.float64()),
               ColumnType.BOOLEAN: (2, pa.bool_()), ColumnType.STRING: (3, pa.string()),
               ColumnType.BINARY: (4, pa.binary())}


def _versions_of(arrow_type: pa.DataType, value_type: pa.DataType) -> bool:
    """Whether ``arrow_type`` is ``list<struct<timestamp: int64, value: value_type>>``."""
    if not pa.types.is_list(arrow_type) or not pa.types.is_struct(arrow_type.value_type):
        return False
    struct_type = arrow_type.value_type
    return (struct_type.num_fields == 2 and struct_type.field(0).type == pa.int64()
            and struct_type.field(1).type == value_type)


def leaf_array(arrow_type: pa.DataType, leaf: tuple[int, int, bytes | None, bytes, bytes | None]) -> pa.Array:
    """One column of the compiled builders: (length, null count, validity, values or offsets, data)."""
    length, null_count, validity, values, data = leaf
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
    if data is not None:
        buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(arrow_type, length, buffers, null_count=null_count)


class CellTypeError(TablestoreClientError):
    """``FAILFAST``: a cell's Tablestore type does not fit its column in the schema."""


KEY, CELL, VERSIONS, CORRUPT = "key", "cell", "versions", "corrupt"


@dataclass(frozen=True)
class OutputField:
    """Where one output column comes from: a primary-key column (``key``, ``index`` its position), an attribute
    column's newest version (``cell``), all its versions (``versions``), or the corrupt-record text
    (``corrupt``); ``type`` is the Tablestore type the column holds (None for ``corrupt``)."""

    name: str
    source: str
    type: ColumnType | None = None
    index: int = 0


def _is_tombstone_row(row: Row, fence: str) -> bool:
    columns = row.columns
    # columns come sorted by name: only a row of fence cells alone can be a tombstone
    return bool(columns) and columns[0].name == fence and columns[-1].name == fence and is_tombstone(columns, fence)


def _describe_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    return value


def key_text(key: PrimaryKey, limit: int | None = None) -> str:
    """A primary key as errors show it: ``(id=4, k='a', b='0x00ff')``, cut after ``limit`` characters."""
    text = ", ".join(f"{name}={_describe_value(value)!r}" for name, value in key)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    return "(" + text + ")"


class RowsToArrow:
    """Rows of one table as record batches of ``schema`` (an Arrow schema whose fields follow ``fields``)."""

    def __init__(self, fields: Sequence[OutputField], schema: pa.Schema, *, failfast: bool,
                 spark_types: Sequence[str] | None = None) -> None:
        if [f.name for f in fields] != schema.names:
            raise ValueError(f"fields {[f.name for f in fields]} do not match the schema {schema.names}")
        self.fields = tuple(fields)
        self.schema = schema
        self.failfast = failfast
        self._spark_types = list(spark_types) if spark_types else [str(t) for t in schema.types]
        self._cells = {f.name: i for i, f in enumerate(fields) if f.source == CELL}
        self._versions = {f.name: i for i, f in enumerate(fields) if f.source == VERSIONS}
        self.attribute_columns = tuple(f.name for f in fields if f.source in (CELL, VERSIONS))
        self._flat_specs = self._flat_plan()
        # the compiled path's name -> position; a name that is both goes to the cell column, as in batch_python
        self._flat_names = {**self._versions, **self._cells}

    def _flat_plan(self) -> tuple[tuple[int, int, int], ...] | None:
        """``(source, kind, key index)`` per column for the compiled path (source 0 key, 1 cell, 2 corrupt, 3
        versions), or None when it cannot build them (Arrow types other than the exact ones)."""
        specs = []
        for spec, arrow_type in zip(self.fields, self.schema.types, strict=True):
            if spec.source == CORRUPT:
                if arrow_type != pa.string():
                    return None
                specs.append((2, 0, 0))
                continue
            if spec.type is None:
                return None
            kind, expected = _FLAT_KINDS[spec.type]
            if spec.source == VERSIONS:
                if not _versions_of(arrow_type, expected):
                    return None
                specs.append((3, kind, 0))
            elif spec.source in (KEY, CELL) and arrow_type == expected:
                specs.append((0 if spec.source == KEY else 1, kind, spec.index if spec.source == KEY else 0))
            else:
                return None
        return tuple(specs)

    def batch(self, rows: Sequence[Row]) -> pa.RecordBatch:
        """One record batch holding ``rows`` in order (filled in C where the compiled module is in use and
        every cell fits its column; else :meth:`batch_python`)."""
        if _flat_arrays is not None and self._flat_specs is not None:
            rows = rows if isinstance(rows, (list, tuple)) else list(rows)  # both paths may need to iterate it
            batch = self.batch_compiled(rows)
            if batch is not None:
                return batch
        return self.batch_python(rows)

    def batch_compiled(self, rows: Sequence[Row]) -> pa.RecordBatch | None:
        """The compiled path of :meth:`batch`: the same batch, or None when it does not apply (no compiled
        module, an Arrow type other than the exact one, or a cell that does not fit its column: the Python path
        reports those)."""
        if _flat_arrays is None or self._flat_specs is None:
            return None
        leaves = _flat_arrays(rows, self._flat_specs, self._flat_names)
        if leaves is None:
            return None
        return self._batch_of_leaves(len(rows), leaves)

    def page(self, rows: Rows, *, tombstone_fence: str | None = None, drop_empty: bool = False,
             ignored: str | None = None) -> pa.RecordBatch:
        """One record batch of a GetRange page, leaving out tombstones (rows whose cells are all
        ``tombstone_fence``, the newest a string ending in the tombstone suffix) and, with ``drop_empty``, rows
        without a cell other than ``ignored``. Built straight from the page's bytes in C where that applies
        (:meth:`page_compiled`); else the rows are decoded (raising for corrupt bytes) and given to :meth:`batch`."""
        batch = self.page_compiled(rows, tombstone_fence=tombstone_fence, drop_empty=drop_empty, ignored=ignored)
        if batch is not None:
            return batch
        kept = [row for row in rows.decode()
                if not (tombstone_fence is not None and _is_tombstone_row(row, tombstone_fence))
                and not (drop_empty and all(c.name == ignored for c in row.columns))]
        return self.batch(kept)

    def page_compiled(self, rows: Rows, *, tombstone_fence: str | None = None, drop_empty: bool = False,
                      ignored: str | None = None) -> pa.RecordBatch | None:
        """The compiled path of :meth:`page`: the same batch, or None when it does not apply (no compiled module, a
        schema of other Arrow types, a cell that does not fit its column, bytes that do not decode)."""
        if _flat_from_rows is None or self._flat_specs is None:
            return None
        out = _flat_from_rows(rows.data, self._flat_specs, self._flat_names, tombstone_fence, TOMBSTONE_SUFFIX,
                              drop_empty, ignored)
        if out is None:
            return None
        n, leaves = out
        return self._batch_of_leaves(n, leaves)

    def changes(self, records: Records, *, with_action: bool = False) -> tuple[pa.RecordBatch, pa.Array | None]:
        """The streaming source's flat batch of tunnel records: per record a row of its key and, per attribute
        column, its newest PUT value (by timestamp, none counting as 0; of equal ones the first; null when the
        record deletes or lacks the column) or, for a versioned column, every PUT version in that order; plus,
        ``with_action``, the records' action names. Built straight from the bytes in C where that applies
        (:meth:`changes_compiled`); else the records are decoded (raising for corrupt ones) and given to
        :meth:`batch`."""
        straight = self.changes_compiled(records, with_action=with_action)
        if straight is not None:
            return straight
        decoded = records.decode()
        # newest version first per column, as batch() expects of a row (sorted() keeps equal ones in order)
        rows = [Row(r.primary_key, tuple(sorted((c for c in r.columns if c.op == CellOp.PUT),
                                                key=lambda c: -(c.timestamp or 0))))
                for r in decoded]
        actions = pa.array([r.action.name for r in decoded], pa.string()) if with_action else None
        return self.batch(rows), actions

    def changes_compiled(self, records: Records, *,
                         with_action: bool = False) -> tuple[pa.RecordBatch, pa.Array | None] | None:
        """The compiled path of :meth:`changes` (origin records only checked): the same answer, or None when it
        does not apply."""
        if _flat_from_records is None or self._flat_specs is None:
            return None
        out = _flat_from_records(records.data, records.spans, records.actions, self._flat_specs, self._flat_names,
                                 with_action, records.origin_spans)
        if out is None:
            return None
        n, leaves, action_leaf = out
        return (self._batch_of_leaves(n, leaves),
                None if action_leaf is None else leaf_array(pa.string(), action_leaf))

    def _batch_of_leaves(self, n: int, leaves: Sequence[Any]) -> pa.RecordBatch:
        arrays: list[pa.Array] = []
        for field, spec, leaf in zip(self.schema, self.fields, leaves, strict=True):
            if leaf is None:  # the corrupt-record column: every cell fitted
                arrays.append(pa.nulls(n, pa.string()))
            elif spec.source == VERSIONS:  # (list validity and offsets, timestamps, values)
                (length, null_count, validity, offsets, _), stamps, values = leaf
                struct_type = field.type.value_type
                struct = pa.StructArray.from_arrays(
                    [leaf_array(struct_type.field(0).type, stamps), leaf_array(struct_type.field(1).type, values)],
                    fields=list(struct_type))
                arrays.append(pa.Array.from_buffers(
                    field.type, length, [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets)],
                    null_count=null_count, children=[struct]))
            else:
                arrays.append(leaf_array(field.type, leaf))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def batch_python(self, rows: Sequence[Row]) -> pa.RecordBatch:
        """One record batch holding ``rows`` in order, built in Python (the reference of the compiled path)."""
        n = len(rows)
        cells: dict[int, list[Any]] = {i: [None] * n for i in self._cells.values()}
        versions: dict[int, list[list[tuple[int | None, Any]] | None]] = {
            i: [None] * n for i in self._versions.values()}
        cell_index, version_index = self._cells, self._versions
        for r, row in enumerate(rows):
            for column in row.columns:  # newest first per name
                name = column.name
                i = cell_index.get(name)
                if i is not None:
                    slot = cells[i]
                    if slot[r] is None:
                        slot[r] = column.value
                    continue
                i = version_index.get(name)
                if i is not None:
                    held = versions[i][r]
                    if held is None:
                        versions[i][r] = [(column.timestamp, column.value)]
                    else:
                        held.append((column.timestamp, column.value))
        corrupt: dict[int, dict[str, Any]] = {}
        arrays: list[pa.Array] = []
        for i, spec in enumerate(self.fields):
            if spec.source == KEY:
                values = [row.primary_key[spec.index][1] for row in rows]
                arrays.append(self._array(values, i, rows, corrupt, None))
            elif spec.source == CELL:
                arrays.append(self._array(cells[i], i, rows, corrupt, None))
            elif spec.source == VERSIONS:
                arrays.append(self._versions_array(versions[i], i, rows, corrupt))
            else:
                arrays.append(pa.nulls(n, pa.string()))  # filled below
        for i, spec in enumerate(self.fields):
            if spec.source == CORRUPT:
                texts: list[str | None] = [None] * n
                for r, problems in corrupt.items():
                    texts[r] = json.dumps({"primary_key": {k: _describe_value(v) for k, v in rows[r].primary_key},
                                           "columns": problems}, sort_keys=True)
                arrays[i] = pa.array(texts, pa.string())
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _mismatch(self, i: int, row: Row, value: Any, corrupt: dict[int, dict[str, Any]], r: int) -> None:
        spec = self.fields[i]
        try:
            found = value_type(value)
            found_text = found.value if found is not None else "NULL"
        except TypeError:
            found_text = type(value).__name__
        if self.failfast or not self.schema.field(i).nullable and spec.source == KEY:
            raise CellTypeError(
                f"row {key_text(row.primary_key)}, column {spec.name!r}: the cell is {found_text}, but the "
                f"schema says {self._spark_types[i]} (Tablestore {spec.type.value if spec.type else '?'}); "
                "use mode PERMISSIVE to read it as null, or fix the schema")
        corrupt.setdefault(r, {})[spec.name] = {"cell_type": found_text, "schema_type": self._spark_types[i],
                                                "value": _describe_value(value)}

    def _checked(self, values: list[Any], i: int, rows: Sequence[Row], corrupt: dict[int, dict[str, Any]],
                 row_of: list[int] | None) -> list[Any]:
        """``values`` with every cell that is not of the column's type replaced by None (or an error)."""
        kind = self.fields[i].type
        assert kind is not None
        expected = _PYTHON_TYPE[kind]
        if set(map(type, values)) <= {expected, type(None)}:
            return values  # the common case, checked at C speed
        out: list[Any] = []
        for j, value in enumerate(values):
            if value is None:
                out.append(None)
                continue
            try:
                found = value_type(value)
            except TypeError:
                found = None
            if found is kind:
                out.append(normalized(value, kind))
            else:
                r = row_of[j] if row_of is not None else j
                self._mismatch(i, rows[r], value, corrupt, r)
                out.append(None)
        return out

    def _array(self, values: list[Any], i: int, rows: Sequence[Row], corrupt: dict[int, dict[str, Any]],
               row_of: list[int] | None) -> pa.Array:
        return pa.array(self._checked(values, i, rows, corrupt, row_of), self.schema.field(i).type)

    def _versions_array(self, per_row: list[list[tuple[int | None, Any]] | None], i: int, rows: Sequence[Row],
                        corrupt: dict[int, dict[str, Any]]) -> pa.Array:
        list_type = self.schema.field(i).type
        struct_type = list_type.value_type
        offsets = [0]
        stamps: list[int | None] = []
        values: list[Any] = []
        row_of: list[int] = []
        nulls: list[bool] = []
        for r, held in enumerate(per_row):
            if held:
                for stamp, value in held:
                    stamps.append(stamp)
                    values.append(value)
                    row_of.append(r)
            nulls.append(held is None)
            offsets.append(len(values))
        checked = self._checked(values, i, rows, corrupt, row_of)
        struct = pa.StructArray.from_arrays(
            [pa.array(stamps, struct_type.field(0).type), pa.array(checked, struct_type.field(1).type)],
            fields=list(struct_type))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct, type=list_type,
                                        mask=pa.array(nulls, pa.bool_()))
