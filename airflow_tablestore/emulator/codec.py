"""The emulator's own PlainBuffer codec (header, rows, cells, CRC-8, sequence extension, SQLVariant).

Independent of ``airflow_tablestore.client`` on purpose: client and emulator share only the protobuf wire
definitions, so each side checks the other. Values are plain Python objects: ``int`` INTEGER, ``float``
DOUBLE, ``bool`` BOOLEAN, ``str`` STRING, ``bytes`` BINARY, and the :data:`INF_MIN`/:data:`INF_MAX`/
:data:`AUTO_INCREMENT` singletons for the special primary-key values.

Size (~420 lines): one job, the PlainBuffer wire format, whose encoder and decoder share every tag,
length rule and the CRC; splitting them would put the format in two places. It is a few lines over the bar.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from airflow_tablestore.emulator.errors import EmulatorError

HEADER = b"\x75\x00\x00\x00"

TAG_ROW_PK = 0x01
TAG_ROW_DATA = 0x02
TAG_CELL = 0x03
TAG_CELL_NAME = 0x04
TAG_CELL_VALUE = 0x05
TAG_CELL_TYPE = 0x06
TAG_CELL_TIMESTAMP = 0x07
TAG_DELETE_ROW_MARKER = 0x08
TAG_ROW_CHECKSUM = 0x09
TAG_CELL_CHECKSUM = 0x0A
TAG_EXTENSION = 0x0B
TAG_SEQ_INFO = 0x0C
TAG_SEQ_INFO_EPOCH = 0x0D
TAG_SEQ_INFO_TS = 0x0E
TAG_SEQ_INFO_ROW_INDEX = 0x0F

VT_INTEGER = 0x00
VT_DOUBLE = 0x01
VT_BOOLEAN = 0x02
VT_STRING = 0x03
VT_NULL = 0x06
VT_BLOB = 0x07
VT_INF_MIN = 0x09
VT_INF_MAX = 0x0A
VT_AUTO_INCREMENT = 0x0B

OP_DELETE_ALL = 0x01
OP_DELETE_ONE = 0x03
OP_INCREMENT = 0x04


class Special:
    """A named singleton primary-key value (INF_MIN, INF_MAX, AUTO_INCREMENT)."""

    __slots__ = ("name", "vtype")

    def __init__(self, name: str, vtype: int) -> None:
        self.name = name
        self.vtype = vtype

    def __repr__(self) -> str:
        return self.name


INF_MIN = Special("INF_MIN", VT_INF_MIN)
INF_MAX = Special("INF_MAX", VT_INF_MAX)
AUTO_INCREMENT = Special("AUTO_INCREMENT", VT_AUTO_INCREMENT)

Value = int | float | bool | str | bytes
PKValue = int | str | bytes | Special
CellSpec = tuple[str, Any, int | None, int | None]
"""``(name, value, op, ts)`` of a cell to encode."""


class Cell(NamedTuple):
    """One decoded data cell: value (None for deletes), op byte (None = PUT) and timestamp in ms."""

    name: str
    value: Value | None
    op: int | None
    ts: int | None


class PBRow(NamedTuple):
    """One decoded PlainBuffer row."""

    pk: list[tuple[str, PKValue]]
    cells: list[Cell]
    delete_marker: bool


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table.append(crc)
    return table


CRC_TABLE = _make_table()


CRC_TABLE2 = [CRC_TABLE[CRC_TABLE[i >> 8] ^ (i & 0xFF)] for i in range(65536)]
"""Two bytes per step: ``CRC_TABLE2[(crc << 8) ^ word16_be] == T[T[crc ^ b0] ^ b1]``."""


def crc8(crc: int, data: bytes) -> int:
    """Fold ``data`` into ``crc`` (CRC-8, polynomial 0x07, init 0, MSB first); two bytes per step when long."""
    n = len(data)
    if n < 16:
        t = CRC_TABLE
        for b in data:
            crc = t[crc ^ b]
        return crc
    start = 0
    if n & 1:
        crc = CRC_TABLE[crc ^ data[0]]
        start = 1
    t2 = CRC_TABLE2
    for w in struct.unpack_from(f">{n >> 1}H", data, start):
        crc = t2[(crc << 8) ^ w]
    return crc


def crc8_byte(crc: int, b: int) -> int:
    return CRC_TABLE[crc ^ (b & 0xFF)]


_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


class PlainBufferError(EmulatorError):
    """Malformed PlainBuffer in a request: answered as 400 OTSParameterInvalid."""

    def __init__(self, message: str) -> None:
        super().__init__("OTSParameterInvalid", message, 400)


# --------------------------------------------------------------------------------------------------- encode
def value_payload(value: Value | Special) -> bytes:
    """Type byte + payload (the 'SQLVariant' form, also what the cell CRC covers)."""
    if isinstance(value, bool):
        return bytes((VT_BOOLEAN, 1 if value else 0))
    if isinstance(value, int):
        return bytes((VT_INTEGER,)) + _I64.pack(value)
    if isinstance(value, float):
        return bytes((VT_DOUBLE,)) + _F64.pack(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return bytes((VT_STRING,)) + _I32.pack(len(raw)) + raw
    if isinstance(value, bytes | bytearray):
        return bytes((VT_BLOB,)) + _I32.pack(len(value)) + bytes(value)
    if isinstance(value, Special):
        return bytes((value.vtype,))
    raise TypeError(f"unsupported value type {type(value).__name__}")


_NAME_CACHE: dict[str, tuple[bytes, int]] = {}


def _name_prefix(name: str) -> tuple[bytes, int]:
    """``03 04 len name`` and the CRC of the name bytes (memoised: column names repeat)."""
    got = _NAME_CACHE.get(name)
    if got is None:
        raw = name.encode("utf-8")
        got = (b"\x03\x04" + _I32.pack(len(raw)) + raw, crc8(0, raw))
        if len(_NAME_CACHE) < 65536:
            _NAME_CACHE[name] = got
    return got


def _encode_cell(
    out: bytearray, name: str, value: Value | Special | None, op: int | None, ts: int | None
) -> int:
    prefix, crc = _name_prefix(name)
    out += prefix
    if value is not None:
        payload = value_payload(value)
        out.append(TAG_CELL_VALUE)
        out += _I32.pack(len(payload))
        out += payload
        crc = crc8(crc, payload)
    if op is not None:
        out.append(TAG_CELL_TYPE)
        out.append(op)
    if ts is not None:
        packed = _I64.pack(ts)
        out.append(TAG_CELL_TIMESTAMP)
        out += packed
        crc = crc8(crc, packed)
    if op is not None:
        crc = crc8_byte(crc, op)
    out.append(TAG_CELL_CHECKSUM)
    out.append(crc)
    return crc


def encode_row_body(
    pk: Sequence[tuple[str, Any]],
    cells: Sequence[CellSpec] = (),
    delete_marker: bool = False,
    seq: tuple[int, int, int] | None = None,
) -> bytes:
    """One row without header. ``cells`` = ``(name, value, op, ts)``; ``seq`` = ``(epoch, ts_us, row_index)``."""
    out = bytearray()
    out.append(TAG_ROW_PK)
    row_crc = 0
    for name, value in pk:
        row_crc = crc8_byte(row_crc, _encode_cell(out, name, value, None, None))
    if cells:
        out.append(TAG_ROW_DATA)
        for name, value, op, ts in cells:
            row_crc = crc8_byte(row_crc, _encode_cell(out, name, value, op, ts))
    if delete_marker:
        out.append(TAG_DELETE_ROW_MARKER)
    row_crc = crc8_byte(row_crc, 1 if delete_marker else 0)
    if seq is not None:
        epoch, ts_us, row_index = seq
        out += b"\x0b\x18\x00\x00\x00\x0c\x13\x00\x00\x00\x0d"
        out += _U32.pack(epoch)
        out.append(TAG_SEQ_INFO_TS)
        out += _I64.pack(ts_us)
        out.append(TAG_SEQ_INFO_ROW_INDEX)
        out += _U32.pack(row_index)
    out.append(TAG_ROW_CHECKSUM)
    out.append(row_crc)
    return bytes(out)


def encode_row(
    pk: Sequence[tuple[str, Any]],
    cells: Sequence[CellSpec] = (),
    delete_marker: bool = False,
    seq: tuple[int, int, int] | None = None,
) -> bytes:
    """Header + one row."""
    return HEADER + encode_row_body(pk, cells, delete_marker, seq)


def encode_pk(pk: Sequence[tuple[str, Any]]) -> bytes:
    """Header + a PK-only row."""
    return HEADER + encode_row_body(pk)


# --------------------------------------------------------------------------------------------------- decode
_unpack_i32 = _I32.unpack_from
_unpack_i64 = _I64.unpack_from
_unpack_f64 = _F64.unpack_from
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


def decode_variant(data: bytes) -> Value | Special:
    """Decode a SQLVariant (type byte + payload, no length prefix), as used by filter values."""
    try:
        value, pos = _decode_typed(data, 1, data[0], "filter")
    except (IndexError, struct.error):
        raise PlainBufferError("Deserialize filter failed.") from None
    if pos != len(data):
        raise PlainBufferError("Deserialize filter failed.")
    return value
