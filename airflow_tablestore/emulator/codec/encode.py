"""PlainBuffer encoder of the emulator: values (SQLVariant), cells, rows with checksums and sequence info.

Used for every row the emulator returns (reads, stream records, snapshot records). The format itself is in
:mod:`.format`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_tablestore.emulator.codec.format import (
    F64,
    HEADER,
    I32,
    I64,
    TAG_CELL_CHECKSUM,
    TAG_CELL_TIMESTAMP,
    TAG_CELL_TYPE,
    TAG_CELL_VALUE,
    TAG_DELETE_ROW_MARKER,
    TAG_ROW_CHECKSUM,
    TAG_ROW_DATA,
    TAG_ROW_PK,
    TAG_SEQ_INFO_ROW_INDEX,
    TAG_SEQ_INFO_TS,
    U32,
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INTEGER,
    VT_STRING,
    CellSpec,
    Special,
    Value,
    crc8,
    crc8_byte,
)


def value_payload(value: Value | Special) -> bytes:
    """Type byte + payload (the 'SQLVariant' form, also what the cell CRC covers)."""
    if isinstance(value, bool):
        return bytes((VT_BOOLEAN, 1 if value else 0))
    if isinstance(value, int):
        return bytes((VT_INTEGER,)) + I64.pack(value)
    if isinstance(value, float):
        return bytes((VT_DOUBLE,)) + F64.pack(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return bytes((VT_STRING,)) + I32.pack(len(raw)) + raw
    if isinstance(value, bytes | bytearray):
        return bytes((VT_BLOB,)) + I32.pack(len(value)) + bytes(value)
    if isinstance(value, Special):
        return bytes((value.vtype,))
    raise TypeError(f"unsupported value type {type(value).__name__}")


_NAME_CACHE: dict[str, tuple[bytes, int]] = {}


def _name_prefix(name: str) -> tuple[bytes, int]:
    """``03 04 len name`` and the CRC of the name bytes (memoised: column names repeat)."""
    got = _NAME_CACHE.get(name)
    if got is None:
        raw = name.encode("utf-8")
        got = (b"\x03\x04" + I32.pack(len(raw)) + raw, crc8(0, raw))
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
        out += I32.pack(len(payload))
        out += payload
        crc = crc8(crc, payload)
    if op is not None:
        out.append(TAG_CELL_TYPE)
        out.append(op)
    if ts is not None:
        packed = I64.pack(ts)
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
    """One row without header. ``cells`` = ``(name, value, op, ts)``; ``seq`` = ``(epoch, ts_us,
    row_index)``."""
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
        out += U32.pack(epoch)
        out.append(TAG_SEQ_INFO_TS)
        out += I64.pack(ts_us)
        out.append(TAG_SEQ_INFO_ROW_INDEX)
        out += U32.pack(row_index)
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


def encode_primary_key(pk: Sequence[tuple[str, Any]]) -> bytes:
    """Header + a PK-only row."""
    return HEADER + encode_row_body(pk)
