"""Order-preserving binary encoding of primary keys: SQLite BLOB comparison (memcmp) gives Tablestore order.

Per PK column: one marker byte ``0x00`` INF_MIN, ``0x01`` a value, ``0x02`` INF_MAX; then for a value:
INTEGER = 8 bytes big-endian with the sign bit flipped (signed order); STRING (UTF-8) / BINARY = the bytes
with ``00`` escaped as ``00 FF`` and terminated by ``00 01`` (unsigned byte order, proper prefix first).
An INF marker ends the encoding (later columns cannot change the order relative to stored rows).
"""

from __future__ import annotations

import struct

from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN, PKValue, Special

M_MIN = 0x00
M_VAL = 0x01
M_MAX = 0x02
_U64 = struct.Struct(">Q")
_SIGN = 1 << 63


def encode_key(values: list[PKValue] | tuple[PKValue, ...]) -> bytes:
    """Encode PK values (schema order, types already validated) into an order-preserving key."""
    out = bytearray()
    for v in values:
        if isinstance(v, Special):
            out.append(M_MIN if v is INF_MIN else M_MAX)
            break
        out.append(M_VAL)
        if isinstance(v, int):
            out += _U64.pack((v + _SIGN) & 0xFFFFFFFFFFFFFFFF)
        else:
            raw = v.encode("utf-8") if isinstance(v, str) else v
            out += raw.replace(b"\x00", b"\x00\xff")
            out += b"\x00\x01"
    return bytes(out)


def decode_key(key: bytes, types: list[str]) -> list[PKValue]:
    """Inverse of :func:`encode_key` given the column types (``INTEGER``/``STRING``/``BINARY``)."""
    values: list[PKValue] = []
    pos = 0
    for t in types:
        if pos >= len(key):
            break
        marker = key[pos]
        pos += 1
        if marker == M_MIN:
            values.append(INF_MIN)
            break
        if marker == M_MAX:
            values.append(INF_MAX)
            break
        if t == "INTEGER":
            (u,) = _U64.unpack_from(key, pos)
            values.append(u - _SIGN)
            pos += 8
            continue
        buf = bytearray()
        while True:
            b = key[pos]
            if b == 0:
                nxt = key[pos + 1]
                pos += 2
                if nxt == 0x01:
                    break
                buf.append(0)
            else:
                buf.append(b)
                pos += 1
        values.append(buf.decode("utf-8") if t == "STRING" else bytes(buf))
    return values


def successor(key: bytes) -> bytes:
    """The smallest key strictly greater than ``key`` and every key having it as prefix... of a full row key.

    Full row keys are never prefixes of each other, so ``key + b"\\x00"`` is the immediate successor.
    """
    return key + b"\x00"
