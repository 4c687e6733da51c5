"""The PlainBuffer wire format as the emulator's codec sees it: tags, value types, CRC-8 and value classes.

Shared by the encoder (:mod:`.encode`) and the decoder (:mod:`.decode`) so the format is written down once
on the emulator side; see the package docstring for why the emulator has its own PlainBuffer codec at all.
"""

from __future__ import annotations

import struct
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

I32 = struct.Struct("<i")
U32 = struct.Struct("<I")
I64 = struct.Struct("<q")
F64 = struct.Struct("<d")


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


class PlainBufferError(EmulatorError):
    """Malformed PlainBuffer in a request: answered as 400 OTSParameterInvalid."""

    def __init__(self, message: str) -> None:
        super().__init__("OTSParameterInvalid", message, 400)


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
    """Fold ``data`` into ``crc`` (CRC-8, polynomial 0x07, init 0, MSB first); two bytes per step when
    long."""
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
