"""CRC-8 as used by PlainBuffer: polynomial 0x07, MSB first, init 0, no reflection, no final XOR.

``crc8(b"123456789") == 0xF4`` (CRC-8/SMBUS). Besides the classic 256-entry table this module builds a
65536-entry table that consumes two bytes per lookup, so checksumming a slice costs one Python-level step per
two bytes. Both tables are built at import with ``bytes.translate`` (a few hundred microseconds).
"""

from __future__ import annotations

import sys

__all__ = ["CRC8_TABLE", "CRC8_TABLE16", "crc8", "crc8_byte"]

_POLY = 0x07


def _build_table() -> bytes:
    table = bytearray(256)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = ((crc << 1) ^ _POLY) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table[i] = crc
    return bytes(table)


CRC8_TABLE: bytes = _build_table()
"""``CRC8_TABLE[crc ^ byte]`` is the CRC state after feeding ``byte`` to state ``crc``."""

_IDENTITY = bytes(range(256))
_XOR_PERMUTATIONS = [bytes(i ^ k for i in range(256)) for k in range(256)]


def _build_table16() -> bytes:
    # Index = 16-bit word as read in native byte order from two consecutive input bytes (b0 first, b1 second).
    # Entry = T[T[b0] ^ b1]: the state after feeding b0 then b1 to state 0. The running state is XORed into
    # the position of b0 (the low byte on little-endian machines, the high byte on big-endian ones).
    t = CRC8_TABLE
    if sys.byteorder == "little":
        # Row b1 (high byte) lists b0 = 0..255: T[T[b0] ^ b1] = translate(identity, T) -> xor b1 -> T.
        first = _IDENTITY.translate(t)
        return b"".join(first.translate(_XOR_PERMUTATIONS[b1]).translate(t) for b1 in range(256))
    # Big-endian: row b0 (high byte) lists b1 = 0..255: T[T[b0] ^ b1] = xor-permutation of T[b0], then T.
    return b"".join(_XOR_PERMUTATIONS[t[b0]].translate(t) for b0 in range(256))


CRC8_TABLE16: bytes = _build_table16()
"""Two-bytes-per-step table; see :func:`crc8` for how it is indexed."""

_SMALL = 48  # below this a plain byte loop beats the memoryview set-up of the two-byte loop

_STATE_SHIFT = 0 if sys.byteorder == "little" else 8


def crc8_byte(crc: int, byte: int) -> int:
    """Feed one byte (0..255) to the CRC state ``crc``."""
    return CRC8_TABLE[crc ^ byte]


def crc8(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-8 of ``data`` continuing from state ``crc`` (0 for a fresh checksum)."""
    table = CRC8_TABLE
    if len(data) < _SMALL:
        for byte in data if not isinstance(data, memoryview) else data.cast("B"):
            crc = table[crc ^ byte]
        return crc
    view = memoryview(data).cast("B")
    n = len(view)
    if n & 1:
        crc = CRC8_TABLE[crc ^ view[0]]
        view = view[1:]
    if n > 1:
        t16 = CRC8_TABLE16
        shift = _STATE_SHIFT
        for word in view.cast("H"):
            crc = t16[word ^ (crc << shift)]
    return crc
