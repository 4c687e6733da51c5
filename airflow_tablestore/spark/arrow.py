"""Tablestore values and rows -> Arrow: the one conversion the data source and the consumer's change log share.

Every Tablestore value maps to one Python type and one Arrow type, exactly: INTEGER ``int`` ``int64``, DOUBLE
``float`` ``float64``, BOOLEAN ``bool`` ``bool``, STRING ``str`` ``string``, BINARY ``bytes`` ``binary``
(:data:`ARROW_TYPES`, :func:`value_type`). Two shapes are built from it, column by column (one Python pass
over the rows, then one C conversion per column; never a Python object per output row):

* :class:`TypedValues` — values of *any* type as a type name plus one leaf per type: the consumer's change log
  (``spark/changes.py``) stores every cell this way;
* :class:`RowsToArrow` — rows (``client.model.Row``) as a ``RecordBatch`` of a fixed schema: primary-key
  columns, the newest version of attribute columns, or all versions as ``list<struct<timestamp, value>>``
  newest first; the ``tablestore`` data source yields these. A cell whose type does not fit its column is
  null plus a description in the corrupt-record column (``PERMISSIVE``) or a :class:`CellTypeError` naming the
  row key, the column and both types (``FAILFAST``). Where the compiled PlainBuffer module is in use, the
  batch is filled in C (the same batch); the Python path runs for any batch holding a cell that does not fit its
  column. :meth:`RowsToArrow.batch_encoded` builds that batch straight from a GetRange page's PlainBuffer bytes,
  and :meth:`RowsToArrow.changes_encoded` the streaming source's flat batch straight from tunnel records.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import ColumnType, PrimaryKey, Row
from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION
from airflow_tablestore.client.records import EncodedRecords

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


def compiled_arrow() -> Any:
    """The compiled Arrow builders (``_arrow_speedups.c``), or None: not built, or the compiled PlainBuffer
    decoder is not in use (``TABLESTORE_PLAINBUFFER=python`` switches both off)."""
    if IMPLEMENTATION != "c":
        return None
    try:
        from airflow_tablestore.spark import _arrow_speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _arrow_speedups


# ---- rows of a table as record batches ---------------------------------------------------------------------

_flat_arrays = getattr(compiled_arrow(), "flat_arrays", None)
_flat_from_rows = getattr(compiled_arrow(), "flat_from_rows", None)
_flat_from_records = getattr(compiled_arrow(), "flat_from_records", None)
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

    @property
    def takes_encoded(self) -> bool:
        """Whether :meth:`batch_encoded` can apply (compiled module in use, a schema of the exact Arrow types)."""
        return _flat_from_rows is not None and self._flat_specs is not None

    def batch_encoded(self, data: bytes, *, tombstone_fence: str | None = None, tombstone_suffix: str | None = None,
                      drop_empty: bool = False, ignored: str | None = None) -> pa.RecordBatch | None:
        """:meth:`batch` of ``decode_rows(data)`` (a GetRange page's rows bytes), built in C without decoding,
        leaving out tombstones (rows whose cells are all ``tombstone_fence``, the newest a string ending in
        ``tombstone_suffix``) and, with ``drop_empty``, rows without a cell other than ``ignored``. None when it
        does not apply: then decode the rows (which raises for corrupt bytes) and use :meth:`batch`."""
        if _flat_from_rows is None or self._flat_specs is None:
            return None
        out = _flat_from_rows(data, self._flat_specs, self._flat_names, tombstone_fence, tombstone_suffix,
                              drop_empty, ignored)
        if out is None:
            return None
        n, leaves = out
        return self._batch_of_leaves(n, leaves)

    @property
    def takes_changes(self) -> bool:
        """Whether :meth:`changes_encoded` can apply (as :attr:`takes_encoded`)."""
        return _flat_from_records is not None and self._flat_specs is not None

    def changes_encoded(self, records: EncodedRecords, *,
                        with_action: bool = False) -> tuple[pa.RecordBatch, pa.Array | None] | None:
        """The streaming source's flat batch of tunnel records kept encoded, built in C without decoding: per
        record a row of its key and, per attribute column, its newest PUT value (by timestamp, none counting as
        0; of equal ones the first; null when the record deletes or lacks the column) or, for a versioned column,
        every PUT version in that order; plus, ``with_action``, the records' action names. Origin records are
        only checked. None when it does not apply: then decode the records (which raises for corrupt ones) and
        use :meth:`batch`."""
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
