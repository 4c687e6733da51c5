"""PlainBuffer decoder of the emulator: request rows (header, cells, checksums) and filter SQLVariants.

Every malformed input raises :class:`~.format.PlainBufferError` (400 ``OTSParameterInvalid``) with the
service's message; truncated data never escapes as ``IndexError``/``struct.error``. The format itself is in
:mod:`.format`.
"""

from __future__ import annotations

import struct
from typing import Any

from airflow_tablestore.emulator.codec.format import (
    AUTO_INCREMENT,
    CRC_TABLE,
    F64,
    HEADER,
    I32,
    I64,
    INF_MAX,
    INF_MIN,
    TAG_CELL,
    TAG_CELL_CHECKSUM,
    TAG_CELL_NAME,
    TAG_CELL_TIMESTAMP,
    TAG_CELL_TYPE,
    TAG_CELL_VALUE,
    TAG_DELETE_ROW_MARKER,
    TAG_EXTENSION,
    TAG_ROW_CHECKSUM,
    TAG_ROW_DATA,
    TAG_ROW_PK,
    VT_AUTO_INCREMENT,
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INF_MAX,
    VT_INF_MIN,
    VT_INTEGER,
    VT_STRING,
    Cell,
    PBRow,
    PKValue,
    PlainBufferError,
    Special,
    Value,
    crc8,
)

_unpack_i32 = I32.unpack_from
_unpack_i64 = I64.unpack_from
_unpack_f64 = F64.unpack_from
_TRUNCATED = "Cell data broken, unexpected end of data."


def _take(data: bytes, pos: int, n: int) -> bytes:
    if n < 0 or pos + n > len(data):
        raise PlainBufferError(_TRUNCATED)
    return data[pos : pos + n]


def _decode_typed(data: bytes, pos: int, vtype: int, field: str) -> tuple[Value | Special, int]:
    """Decode the payload of a value of type ``vtype`` at ``pos``; returns ``(value, new_pos)``."""
    if vtype == VT_INTEGER:
        return _unpack_i64(data, pos)[0], pos + 8
    if vtype in (VT_STRING, VT_BLOB):
        n = _unpack_i32(data, pos)[0]
        raw = _take(data, pos + 4, n)
        if vtype == VT_BLOB:
            return raw, pos + 4 + n
        try:
            return raw.decode("utf-8"), pos + 4 + n
        except UnicodeDecodeError:
            raise PlainBufferError(f"Value of column '{field}' must be UTF8 encoding.") from None
    if vtype == VT_DOUBLE:
        return _unpack_f64(data, pos)[0], pos + 8
    if vtype == VT_BOOLEAN:
        return data[pos] != 0, pos + 1
    if vtype == VT_INF_MIN:
        return INF_MIN, pos
    if vtype == VT_INF_MAX:
        return INF_MAX, pos
    if vtype == VT_AUTO_INCREMENT:
        return AUTO_INCREMENT, pos
    raise PlainBufferError(f"Invalid column value type: {vtype}.")


def _decode_cell(data: bytes, pos: int) -> tuple[Cell, int, int]:
    """Decode one cell starting after its ``TAG_CELL``; returns ``(cell, cell_crc, new_pos)``."""
    if data[pos] != TAG_CELL_NAME:
        raise PlainBufferError("Cell data broken, expect cell name.")
    n = _unpack_i32(data, pos + 1)[0]
    raw_name = _take(data, pos + 5, n)
    pos += 5 + n
    try:
        name = raw_name.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainBufferError("Invalid column name: not UTF-8.") from None
    crc = crc8(0, raw_name)
    value: Any = None
    op: int | None = None
    ts: int | None = None
    tag = data[pos]
    if tag == TAG_CELL_VALUE:
        length = _unpack_i32(data, pos + 1)[0]
        start = pos + 5
        value, pos = _decode_typed(data, start + 1, data[start], name)
        if pos - start != length:
            raise PlainBufferError("Cell data broken, value length mismatch.")
        crc = crc8(crc, data[start:pos])
        tag = data[pos]
    if tag == TAG_CELL_TYPE:
        op = data[pos + 1]
        pos += 2
        tag = data[pos]
    if tag == TAG_CELL_TIMESTAMP:
        packed = _take(data, pos + 1, 8)
        ts = _unpack_i64(packed)[0]
        crc = crc8(crc, packed)
        pos += 9
        tag = data[pos]
    if op is not None:
        crc = CRC_TABLE[crc ^ op]
    if tag != TAG_CELL_CHECKSUM:
        raise PlainBufferError("Invalid row: missing checksum.")
    got = data[pos + 1]
    if got != crc:
        raise PlainBufferError(f"Cell data broken, checksum is mismatch, expect: {crc}, actual: {got}.")
    return Cell(name, value, op, ts), crc, pos + 2


def _decode_row(data: bytes, pos: int) -> tuple[PBRow, int]:
    try:
        return _decode_row_unchecked(data, pos)
    except (IndexError, struct.error):
        raise PlainBufferError(_TRUNCATED) from None


def _decode_row_unchecked(data: bytes, pos: int) -> tuple[PBRow, int]:
    if data[pos] != TAG_ROW_PK:
        raise PlainBufferError("Cell data broken, expect primary key tag.")
    pos += 1
    end = len(data)
    pk: list[tuple[str, PKValue]] = []
    cells: list[Cell] = []
    table = CRC_TABLE
    row_crc = 0
    while pos < end and data[pos] == TAG_CELL:
        cell, crc, pos = _decode_cell(data, pos + 1)
        if cell.op is not None:
            raise PlainBufferError(f"OpType cannot be given for primary key name:{cell.name}.")
        if cell.ts is not None:
            raise PlainBufferError(f"Timestamp cannot be given for primary key name:{cell.name}.")
        if cell.value is None:
            raise PlainBufferError(f"Primary key column '{cell.name}' has no value.")
        pk.append((cell.name, cell.value))  # type: ignore[arg-type]
        row_crc = table[row_crc ^ crc]
    if pos < end and data[pos] == TAG_ROW_DATA:
        pos += 1
        while pos < end and data[pos] == TAG_CELL:
            cell, crc, pos = _decode_cell(data, pos + 1)
            cells.append(cell)
            row_crc = table[row_crc ^ crc]
    marker = False
    if pos < end and data[pos] == TAG_DELETE_ROW_MARKER:
        pos += 1
        marker = True
    row_crc = table[row_crc ^ (1 if marker else 0)]
    if pos < end and data[pos] == TAG_EXTENSION:
        n = _unpack_i32(data, pos + 1)[0]
        _take(data, pos + 5, n)
        pos += 5 + n
    if pos >= end or data[pos] != TAG_ROW_CHECKSUM:
        raise PlainBufferError("Invalid row: missing checksum.")
    got = data[pos + 1]
    if got != row_crc:
        raise PlainBufferError(f"Cell data broken, checksum is mismatch, expect: {row_crc}, actual: {got}.")
    return PBRow(pk, cells, marker), pos + 2


def _check_header(data: bytes) -> None:
    if len(data) < 4 or data[:4] != HEADER:
        actual = int.from_bytes(bytes(data[:4]).ljust(4, b"\0"), "little")
        raise PlainBufferError(f"Cell data broken, mismatch header, actual: {actual}, expect: 117.")


def decode_rows(data: bytes) -> list[PBRow]:
    """Header + 0..n rows."""
    _check_header(data)
    data = bytes(data)
    pos, end = 4, len(data)
    rows = []
    while pos < end:
        row, pos = _decode_row(data, pos)
        rows.append(row)
    return rows


def decode_row(data: bytes) -> PBRow:
    """Header + exactly one row."""
    _check_header(data)
    data = bytes(data)
    row, pos = _decode_row(data, 4)
    if pos != len(data):
        raise PlainBufferError("Cell data broken, trailing bytes after the row.")
    return row


def decode_sql_variant(data: bytes) -> Value | Special:
    """Decode a SQLVariant (type byte + payload, no length prefix), as used by filter values."""
    try:
        value, pos = _decode_typed(data, 1, data[0], "filter")
    except (IndexError, struct.error):
        raise PlainBufferError("Deserialize filter failed.") from None
    if pos != len(data):
        raise PlainBufferError("Deserialize filter failed.")
    return value
