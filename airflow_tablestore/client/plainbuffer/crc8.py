"""CRC-8 as used by PlainBuffer: polynomial 0x07, MSB first, init 0, no reflection, no final XOR.

``crc8(b"123456789") == 0xF4`` (CRC-8/SMBUS). Short inputs go through the classic table, one byte per
step. The CRC is linear over GF(2), which gives two shortcuts:

* ``crc8(data, s) == zero_table(len(data))[s] ^ crc8(data)``: the CRC of a repeated field can be cached and
  continued from any state (``zero_table(k)`` maps a state to the state after ``k`` zero bytes);
* inputs of 80 bytes or more are folded block-wise with ``bytes.translate`` and big-integer XOR (the work per
  byte happens in C): 1.5x faster than the byte loop at 192 bytes, 10x at 4 KB.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_tablestore.client.plainbuffer.implementation import compiled_module

__all__ = ["CRC8_TABLE", "crc8", "crc8_byte", "zero_table"]

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


def _build_powers() -> list[bytes]:
    # T is an invertible linear map on 8-bit states, so its powers cycle: T^k == powers[k % len(powers)].
    identity = bytes(range(256))
    powers = [identity]
    current = CRC8_TABLE
    while current != identity:
        powers.append(current)
        current = current.translate(CRC8_TABLE)
    return powers


_POWERS = _build_powers()
_ORDER = len(_POWERS)


def zero_table(k: int) -> bytes:
    """``zero_table(k)[s]``: the CRC state after feeding ``k`` zero bytes to state ``s``."""
    return _POWERS[k % _ORDER]


def crc8_byte(crc: int, byte: int) -> int:
    """Feed one byte (0..255) to the CRC state ``crc``."""
    return CRC8_TABLE[crc ^ byte]


_LONG = 80  # from this length on the block-wise fold beats the byte loop
_WIDE = 2048  # from this length on, fold 16 bytes per step instead of 4


def crc8(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-8 of ``data`` continuing from state ``crc`` (0 for a fresh checksum)."""
    if isinstance(data, memoryview):
        data = data.cast("B")
    if len(data) < _LONG:
        table = CRC8_TABLE
        for byte in data:
            crc = table[crc ^ byte]
        return crc
    return _POWERS[len(data) % _ORDER][crc] ^ _crc8_from_zero(bytes(data))


def _crc8_long(data: bytes) -> int:
    """CRC-8 from state 0 of a long input, folding B bytes per step in C (B = 4, or 16 for long inputs).

    With ``U = T^p`` and ``E = data.translate(T)`` the CRC is ``F(E) = XOR_j U^(m-1-j)[E_j]``. Grouping E into
    blocks of B bytes gives ``F_U(E) = F_{U^B}(E')`` with ``E'_i = XOR_r U^(B-1-r)[E_{iB+r}]``: each of the B
    strided slices is mapped by one translate table and the results are XORed as big integers. Leading zero
    bytes pad E to a multiple of B (they do not change a CRC that starts from 0).
    """
    powers = _POWERS
    order = _ORDER
    values = data.translate(CRC8_TABLE)
    p = 1
    while len(values) >= _LONG:
        if len(values) < _WIDE:
            pad = -len(values) % 4
            if pad:
                values = bytes(pad) + values
            folded = (
                int.from_bytes(values[0::4].translate(powers[3 * p % order]), "little")
                ^ int.from_bytes(values[1::4].translate(powers[2 * p % order]), "little")
                ^ int.from_bytes(values[2::4].translate(powers[p]), "little")
                ^ int.from_bytes(values[3::4], "little")
            )
            values = folded.to_bytes(len(values) // 4, "little")
            p = 4 * p % order
        else:
            pad = -len(values) % 16
            if pad:
                values = bytes(pad) + values
            folded = 0
            for r in range(16):
                folded ^= int.from_bytes(values[r::16].translate(powers[p * (15 - r) % order]), "little")
            values = folded.to_bytes(len(values) // 16, "little")
            p = 16 * p % order
    step = powers[p]
    state = 0
    for value in values:
        state = step[state] ^ value
    return state


# The compiled CRC-8 (an 8-bytes-per-step table fold in C) when the extension is in use, else the fold above.
_crc8_from_zero: Callable[[bytes], int] = (
    compiled_module().crc8 if compiled_module() is not None else _crc8_long
)
