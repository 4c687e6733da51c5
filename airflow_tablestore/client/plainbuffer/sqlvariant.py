"""PlainBuffer SQLVariant: one value as its type byte + payload (filter values, partition bounds, cell CRCs).

The same bytes follow the ``05 len`` of an encoded cell, so the encoder builds its generic (non fast-path)
values with :func:`value_segment`.
"""

from __future__ import annotations

import struct
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError, TablestoreClientError
from airflow_tablestore.client.model import AUTO_INCREMENT, INF_MAX, INF_MIN
from airflow_tablestore.client.plainbuffer.format import (
    F64,
    VT_AUTO_INCREMENT,
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INF_MAX,
    VT_INF_MIN,
    VT_INTEGER,
    VT_STRING,
)
from airflow_tablestore.client.plainbuffer.format import INT64_MAX as _INT64_MAX
from airflow_tablestore.client.plainbuffer.format import INT64_MIN as _INT64_MIN
from airflow_tablestore.client.plainbuffer.format import SENTINEL_BY_TYPE as _SENTINEL_BY_TYPE
from airflow_tablestore.client.plainbuffer.format import pack_i64 as _pack_i64
from airflow_tablestore.client.plainbuffer.format import pack_u32 as _pack_u32
from airflow_tablestore.client.plainbuffer.format import unpack_f64 as _unpack_f64
from airflow_tablestore.client.plainbuffer.format import unpack_i64 as _unpack_i64
from airflow_tablestore.client.plainbuffer.format import unpack_u32 as _unpack_u32

__all__ = ["decode_sql_variant", "encode_sql_variant", "value_segment"]

# Bound by assignment, not by ``import ... as``: CPython compiles ``name.method(...)`` on an imported
# name as an attribute load plus call (it assumes a module) instead of the cheaper method call.
_F64 = F64


def value_segment(value: Any, column: str, *, primary_key: bool) -> bytes:
    """Type byte + payload of ``value`` (the SQLVariant form, also what the cell CRC covers)."""
    kind = type(value)
    if kind is str:
        raw = value.encode("utf-8")
        return b"\x03" + _pack_u32(len(raw)) + raw
    if kind is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise TablestoreClientError(f"column {column!r}: integer {value} is outside the int64 range")
        return b"\x00" + _pack_i64(value)
    if kind is float:
        return b"\x01" + _F64.pack(value)
    if kind is bool:
        return b"\x02\x01" if value else b"\x02\x00"
    if kind is bytes:
        return b"\x07" + _pack_u32(len(value)) + value
    if value is INF_MIN or value is INF_MAX or value is AUTO_INCREMENT:
        if not primary_key:
            raise TablestoreClientError(f"column {column!r}: {value!r} is only allowed in a primary key")
        return bytes(
            (VT_INF_MIN if value is INF_MIN else VT_INF_MAX if value is INF_MAX else VT_AUTO_INCREMENT,)
        )
    # Subclasses and buffer types (check bool before int: bool is an int subclass).
    if isinstance(value, bool):
        return b"\x02\x01" if value else b"\x02\x00"
    if isinstance(value, int):
        return value_segment(int(value), column, primary_key=primary_key)
    if isinstance(value, float):
        return b"\x01" + _F64.pack(value)
    if isinstance(value, str):
        return value_segment(str(value), column, primary_key=primary_key)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value_segment(bytes(value), column, primary_key=primary_key)
    raise TablestoreClientError(
        f"column {column!r}: unsupported value type {type(value).__name__} "
        "(use int, float, bool, str or bytes)"
    )


def encode_sql_variant(value: Any) -> bytes:
    """Encode a filter/condition value: type byte + payload. ``INF_MIN``/``INF_MAX`` are allowed."""
    if value is AUTO_INCREMENT:
        raise TablestoreClientError("AUTO_INCREMENT cannot be used as a filter or boundary value")
    if value is None:
        raise TablestoreClientError("a filter value cannot be None")
    return value_segment(value, "(filter value)", primary_key=True)


def decode_sql_variant(data: bytes | bytearray | memoryview) -> Any:
    """Decode a value written by :func:`encode_sql_variant`; the input must hold exactly one value."""
    buf = _as_bytes(data)
    if not buf:
        raise PlainBufferError("empty SQLVariant: expected a type byte at offset 0")
    vt = buf[0]
    try:
        if vt == VT_INTEGER:
            value: Any = _unpack_i64(buf, 1)[0]
            end = 9
        elif vt == VT_DOUBLE:
            value = _unpack_f64(buf, 1)[0]
            end = 9
        elif vt == VT_BOOLEAN:
            value = buf[1] != 0
            end = 2
        elif vt in (VT_STRING, VT_BLOB):
            end = 5 + _unpack_u32(buf, 1)[0]
            if end > len(buf):
                raise IndexError
            value = buf[5:end].decode("utf-8") if vt == VT_STRING else buf[5:end]
        elif vt in (VT_INF_MIN, VT_INF_MAX):
            value = _SENTINEL_BY_TYPE[vt]
            end = 1
        else:
            raise PlainBufferError(f"unknown SQLVariant type 0x{vt:02x} at offset 0")
    except (IndexError, struct.error):
        raise PlainBufferError(f"SQLVariant of type 0x{vt:02x} truncated at {len(buf)} bytes") from None
    except UnicodeDecodeError as exc:
        raise PlainBufferError(f"SQLVariant string is not UTF-8: {exc.reason}") from None
    if end != len(buf):
        raise PlainBufferError(f"SQLVariant has {len(buf) - end} trailing bytes after offset {end}")
    return value


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    return data if type(data) is bytes else bytes(data)
