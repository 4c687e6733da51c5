"""PlainBuffer encoding: :class:`Row` tuples into the bytes of table-API requests (and of tunnel records).

Every cell and row CRC is computed while encoding; str, int and float values take inline fast paths and
cell names are cached with the CRC of their bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import CellOp, Column, PrimaryKey, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.crc8 import CRC8_TABLE, crc8
from airflow_tablestore.client.plainbuffer.format import CELL_OP_PUT as _CELL_OP_PUT
from airflow_tablestore.client.plainbuffer.format import (
    HEADER,
    SEQ,
    TAG_CELL_TIMESTAMP,
    TAG_CELL_TYPE,
    TAG_CELL_VALUE,
    TAG_ROW_CHECKSUM,
    TAG_SEQ_INFO,
    TAG_SEQ_INFO_EPOCH,
    TAG_SEQ_INFO_ROW_INDEX,
    TAG_SEQ_INFO_TS,
    VT_DOUBLE,
    VT_INTEGER,
    VT_STRING,
)
from airflow_tablestore.client.plainbuffer.format import INT32_MAX as _INT32_MAX
from airflow_tablestore.client.plainbuffer.format import INT32_MIN as _INT32_MIN
from airflow_tablestore.client.plainbuffer.format import INT64_MAX as _INT64_MAX
from airflow_tablestore.client.plainbuffer.format import INT64_MIN as _INT64_MIN
from airflow_tablestore.client.plainbuffer.format import LONG_VALUE as _LONG_VALUE
from airflow_tablestore.client.plainbuffer.format import NAME_CACHE_LIMIT as _NAME_CACHE_LIMIT
from airflow_tablestore.client.plainbuffer.format import ZERO8 as _ZERO8
from airflow_tablestore.client.plainbuffer.format import pack_u32 as _pack_u32
from airflow_tablestore.client.plainbuffer.sqlvariant import value_segment as _value_segment

__all__ = ["encode_primary_key", "encode_row", "encode_rows"]

# Bound by assignment, not by ``import ... as``: CPython compiles ``name.method(...)`` on an imported
# name as an attribute load plus call (it assumes a module) instead of the cheaper method call.
_SEQ = SEQ

_pack_string_value = struct.Struct("<BIBI").pack  # 05 len 03 n (the bytes follow)
_pack_int_value = struct.Struct("<BIBq").pack  # 05 09000000 00 int64
_pack_double_value = struct.Struct("<BIBd").pack  # 05 09000000 01 float64
_pack_timestamp = struct.Struct("<Bq").pack  # 07 int64
_CELL_CHECKSUMS = [bytes((0x0A, crc)) for crc in range(256)]
_last_timestamp: tuple[int | None, bytes, int] = (None, b"", 0)  # (timestamp, 07 + int64, CRC of the int64)

# ---- name cache: cell name -> (03 04 len name, CRC of the name bytes) ---------------------------------

_encode_names: dict[str, tuple[bytes, int]] = {}


def _name_prefix(name: str) -> tuple[bytes, int]:
    """``03 04 len name`` and the CRC of the name bytes, cached per name."""
    entry = _encode_names.get(name)
    if entry is None:
        if type(name) is not str:
            if not isinstance(name, str):
                raise TablestoreClientError(f"column name {name!r} must be a str, got {type(name).__name__}")
            name = str(name)
        raw = name.encode("utf-8")
        entry = (b"\x03\x04" + _pack_u32(len(raw)) + raw, crc8(raw))
        if len(_encode_names) >= _NAME_CACHE_LIMIT:
            _encode_names.clear()
        _encode_names[name] = entry
    return entry


def _encode_cell(
    out: list[bytes], name: str, value: Any, timestamp: int | None, op: int, *, primary_key: bool
) -> int:
    """Append one cell to ``out``; return its CRC. Inline fast paths for str, int and float values."""
    table = CRC8_TABLE
    prefix, crc = _name_prefix(name)
    out.append(prefix)
    if value is not None:
        kind = type(value)
        if kind is str:
            raw = value.encode("utf-8")
            size = len(raw)
            head = _pack_string_value(TAG_CELL_VALUE, size + 5, VT_STRING, size)
            out.append(head)
            out.append(raw)
            for byte in head[5:]:
                crc = table[crc ^ byte]
            if size < _LONG_VALUE:
                for byte in raw:
                    crc = table[crc ^ byte]
            else:
                crc = crc8(raw, crc)
        elif kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise TablestoreClientError(f"column {name!r}: integer {value} is outside the int64 range")
            cell_value = _pack_int_value(TAG_CELL_VALUE, 9, VT_INTEGER, value)
            out.append(cell_value)
            for byte in cell_value[5:]:
                crc = table[crc ^ byte]
        elif kind is float:
            cell_value = _pack_double_value(TAG_CELL_VALUE, 9, VT_DOUBLE, value)
            out.append(cell_value)
            for byte in cell_value[5:]:
                crc = table[crc ^ byte]
        else:
            segment = _value_segment(value, name, primary_key=primary_key)
            out.append(b"\x05" + _pack_u32(len(segment)) + segment)
            crc = crc8(segment, crc)
    if op:
        out.append(bytes((TAG_CELL_TYPE, op)))
    if timestamp is not None:
        if type(timestamp) is not int:
            if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                raise TablestoreClientError(f"column {name!r}: timestamp must be an int (milliseconds)")
            timestamp = int(timestamp)
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise TablestoreClientError(f"column {name!r}: timestamp {timestamp} is outside the int64 range")
        global _last_timestamp
        cached = _last_timestamp  # cells of a row usually share a timestamp: reuse bytes and CRC
        if cached[0] != timestamp:
            cell_ts = _pack_timestamp(TAG_CELL_TIMESTAMP, timestamp)
            ts_crc = 0
            for byte in cell_ts[1:]:
                ts_crc = table[ts_crc ^ byte]
            cached = _last_timestamp = (timestamp, cell_ts, ts_crc)
        out.append(cached[1])
        crc = _ZERO8[crc] ^ cached[2]
    if op:
        crc = table[crc ^ op]
    out.append(_CELL_CHECKSUMS[crc])
    return crc


def _encode_row_into(out: list[bytes], row: Row) -> None:
    table = CRC8_TABLE
    row_crc = 0
    out.append(b"\x01")
    for item in row.primary_key:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TablestoreClientError(
                f"primary key entries must be (name, value) pairs, got {item!r}"
            ) from None
        if value is None:
            raise TablestoreClientError(f"primary key column {name!r} has no value")
        row_crc = table[row_crc ^ _encode_cell(out, name, value, None, 0, primary_key=True)]
    if row.columns:
        out.append(b"\x02")
        for column in row.columns:
            if type(column) is not Column:
                column = _as_column(column)
            column_name, column_value, timestamp, cell_op = column
            if cell_op is _CELL_OP_PUT:
                if column_value is None:
                    raise TablestoreClientError(f"column {column_name!r}: a PUT cell needs a value")
                op = 0
            else:
                op = _checked_op(column_name, column_value, cell_op)
            crc = _encode_cell(out, column_name, column_value, timestamp, op, primary_key=False)
            row_crc = table[row_crc ^ crc]
    if row.delete_marker:
        out.append(b"\x08")
        row_crc = table[row_crc ^ 1]
    else:
        row_crc = table[row_crc]
    if row.sequence is not None:
        out.append(_encode_sequence(row.sequence))
    out.append(bytes((TAG_ROW_CHECKSUM, row_crc)))


def _as_column(column: Any) -> Column:
    try:
        return Column(*column)
    except TypeError:
        raise TablestoreClientError(
            f"columns must be Column(name, value, timestamp, op) tuples, got {column!r}"
        ) from None


def _checked_op(name: str, value: Any, cell_op: Any) -> int:
    """The op byte of a cell (0 for PUT), after checking that the value fits the op."""
    try:
        op = CellOp(cell_op)
    except ValueError:
        raise TablestoreClientError(f"column {name!r}: unknown cell op {cell_op!r}") from None
    if op in (CellOp.PUT, CellOp.INCREMENT):
        if value is None:
            raise TablestoreClientError(f"column {name!r}: {op.name} cells need a value")
    elif value is not None:
        raise TablestoreClientError(f"column {name!r}: {op.name} cells take no value")
    if op == CellOp.INCREMENT and (not isinstance(value, int) or isinstance(value, bool)):
        raise TablestoreClientError(f"column {name!r}: INCREMENT needs an int, got {type(value).__name__}")
    return int(op)


def _encode_sequence(sequence: SequenceInfo) -> bytes:
    epoch, timestamp, row_index = sequence
    for label, number, low, high in (
        ("epoch", epoch, _INT32_MIN, _INT32_MAX),
        ("timestamp", timestamp, _INT64_MIN, _INT64_MAX),
        ("row_index", row_index, _INT32_MIN, _INT32_MAX),
    ):
        if not isinstance(number, int) or not low <= number <= high:
            raise TablestoreClientError(f"sequence info {label} {number!r} is out of range")
    body = _SEQ.pack(
        TAG_SEQ_INFO,
        19,
        TAG_SEQ_INFO_EPOCH,
        epoch,
        TAG_SEQ_INFO_TS,
        timestamp,
        TAG_SEQ_INFO_ROW_INDEX,
        row_index,
    )
    return b"\x0b" + _pack_u32(len(body)) + body


def encode_row(row: Row) -> bytes:
    """Encode one row with the header: PutRow/UpdateRow rows, DeleteRow/GetRow keys, GetRange bounds."""
    out = [HEADER]
    _encode_row_into(out, row)
    return b"".join(out)


def encode_rows(rows: Iterable[Row]) -> bytes:
    """Encode several rows behind one header (the GetRange response layout)."""
    out = [HEADER]
    for row in rows:
        _encode_row_into(out, row)
    return b"".join(out)


def encode_primary_key(primary_key: PrimaryKey | Iterable[tuple[str, Any]]) -> bytes:
    """Encode a primary key alone (GetRow key, GetRange bound with ``INF_MIN``/``INF_MAX``)."""
    return encode_row(Row(tuple(primary_key)))
