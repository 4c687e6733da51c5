"""PlainBuffer wire format: tags, value types, struct layouts and error helpers shared by encoder and decoder.

A message is the header ``75 00 00 00`` followed by rows::

    row  = 01 pk_cell* [02 data_cell+] [08] [0B ext_len:u32 (0C 13000000 0D epoch 0E ts 0F idx)] 09 row_crc
    cell = 03 04 name_len:u32 name [05 len:u32 type payload] [06 op] [07 ts:i64] 0A cell_crc

Integers are little-endian. The cell CRC-8 covers the name, the value's type byte and payload, the timestamp
and then the op byte; the row CRC-8 folds the cell CRCs and a ``01``/``00`` delete-marker byte (the extension
is not covered). Values map by Python type: ``int`` INTEGER, ``float`` DOUBLE, ``bool`` BOOLEAN, ``str``
STRING, ``bytes`` BINARY, plus the primary-key sentinels ``INF_MIN``, ``INF_MAX`` and ``AUTO_INCREMENT``.

The encoder (:mod:`~airflow_tablestore.client.plainbuffer.encode`) and the decoder
(:mod:`~airflow_tablestore.client.plainbuffer.decode`) import the constants here by name, so that they stay
module globals (or locals bound once per call) in the hot loops.

This codec is one of a deliberate pair: the emulator has its own, independent PlainBuffer implementation
(``airflow_tablestore/emulator/codec/``) on purpose, so that client and emulator test each other over the
wire. That pair and the ``.proto`` files are the only allowed duplicates in the project.
"""

from __future__ import annotations

import struct
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import AUTO_INCREMENT, INF_MAX, INF_MIN, CellOp
from airflow_tablestore.client.plainbuffer.crc8 import zero_table

HEADER = b"\x75\x00\x00\x00"

# Tags
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

# Value types
VT_INTEGER = 0x00
VT_DOUBLE = 0x01
VT_BOOLEAN = 0x02
VT_STRING = 0x03
VT_NULL = 0x06
VT_BLOB = 0x07
VT_INF_MIN = 0x09
VT_INF_MAX = 0x0A
VT_AUTO_INCREMENT = 0x0B

_TAG_NAMES = {
    TAG_ROW_PK: "ROW_PK",
    TAG_ROW_DATA: "ROW_DATA",
    TAG_CELL: "CELL",
    TAG_CELL_NAME: "CELL_NAME",
    TAG_CELL_VALUE: "CELL_VALUE",
    TAG_CELL_TYPE: "CELL_TYPE",
    TAG_CELL_TIMESTAMP: "CELL_TIMESTAMP",
    TAG_DELETE_ROW_MARKER: "DELETE_ROW_MARKER",
    TAG_ROW_CHECKSUM: "ROW_CHECKSUM",
    TAG_CELL_CHECKSUM: "CELL_CHECKSUM",
    TAG_EXTENSION: "EXTENSION",
    TAG_SEQ_INFO: "SEQ_INFO",
    TAG_SEQ_INFO_EPOCH: "SEQ_INFO_EPOCH",
    TAG_SEQ_INFO_TS: "SEQ_INFO_TS",
    TAG_SEQ_INFO_ROW_INDEX: "SEQ_INFO_ROW_INDEX",
}

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

U32 = struct.Struct("<I")
I64 = struct.Struct("<q")
F64 = struct.Struct("<d")
SEQ = struct.Struct("<BIBiBqBi")  # 0C len 0D epoch 0E ts 0F row_index
SEQ_FIELDS = struct.Struct("<BiBqBi")  # 0D epoch 0E ts 0F row_index
SEQ_ONLY_PREFIX = b"\x18\x00\x00\x00\x0c\x13\x00\x00\x00"  # ext_len 24, SEQ_INFO, seq_len 19

unpack_u32 = U32.unpack_from
unpack_i64 = I64.unpack_from
unpack_f64 = F64.unpack_from
pack_u32 = U32.pack
pack_i64 = I64.pack

OPS_BY_BYTE: dict[int, CellOp] = {
    int(CellOp.DELETE_ALL_VERSIONS): CellOp.DELETE_ALL_VERSIONS,
    int(CellOp.DELETE_ONE_VERSION): CellOp.DELETE_ONE_VERSION,
    int(CellOp.INCREMENT): CellOp.INCREMENT,
}
SENTINEL_BY_TYPE: dict[int, Any] = {
    VT_INF_MIN: INF_MIN,
    VT_INF_MAX: INF_MAX,
    VT_AUTO_INCREMENT: AUTO_INCREMENT,
}

CELL_OP_PUT = CellOp.PUT
# CRC-8 of a CRC followed by 8 zero bytes: folds a cached timestamp CRC in by linearity.
ZERO8 = zero_table(8)

# Long values: from this length on crc8() folds block-wise in C, faster than the inline byte loop.
LONG_VALUE = 80

# Bound of the per-process caches of encoded/decoded cell names (cleared when full).
NAME_CACHE_LIMIT = 100_000


# ---- errors --------------------------------------------------------------------------------------------


def tag_name(tag: int) -> str:
    """Readable name of a tag byte (``"unknown"`` for anything else)."""
    return _TAG_NAMES.get(tag, "unknown")


def bad_tag(data: bytes, pos: int, expected: str) -> PlainBufferError:
    """The error for an unexpected tag (or the end of input) at ``pos``."""
    if pos >= len(data):
        return PlainBufferError(f"input truncated at offset {pos} (length {len(data)}): expected {expected}")
    tag = data[pos]
    return PlainBufferError(
        f"unexpected tag 0x{tag:02x} ({tag_name(tag)}) at offset {pos}: expected {expected}"
    )


def check_header(data: bytes) -> None:
    """Raise :class:`PlainBufferError` unless ``data`` starts with :data:`HEADER`."""
    if data[:4] != HEADER:
        raise PlainBufferError(
            f"bad PlainBuffer header {data[:4].hex() or '(empty)'}: expected {HEADER.hex()} at offset 0"
        )
