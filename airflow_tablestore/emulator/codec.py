"""Public API of the emulator's own PlainBuffer codec: header, rows, cells, CRC-8, seq extension, SQLVariant.

This codec is the deliberate second, independent implementation of PlainBuffer in this project; the
client's is ``airflow_tablestore/client/plainbuffer.py``. It is kept separate on purpose, so that client and
emulator test each other: the emulator never imports ``airflow_tablestore.client``, and a misreading of the
format on one side shows up as a failure against the other instead of being shared by both. Together with
:mod:`.codec_format`, :mod:`.codec_encode` and :mod:`.codec_decode` it is the one allowed duplicate in the
code base besides the ``.proto`` files (the wire definitions both sides are generated from).

Values are plain Python objects: ``int`` INTEGER, ``float`` DOUBLE, ``bool`` BOOLEAN, ``str`` STRING,
``bytes`` BINARY, and the :data:`INF_MIN`/:data:`INF_MAX`/:data:`AUTO_INCREMENT` singletons for the special
primary-key values. The code is split by job — :mod:`.codec_format` (tags, value types, CRC-8, value
classes), :mod:`.codec_encode` and :mod:`.codec_decode` — and is imported from here.
"""

from __future__ import annotations

from airflow_tablestore.emulator.codec_decode import (
    decode_row,
    decode_rows,
    decode_variant,
)
from airflow_tablestore.emulator.codec_encode import (
    encode_pk,
    encode_row,
    encode_row_body,
    value_payload,
)
from airflow_tablestore.emulator.codec_format import (
    AUTO_INCREMENT,
    CRC_TABLE,
    CRC_TABLE2,
    HEADER,
    INF_MAX,
    INF_MIN,
    OP_DELETE_ALL,
    OP_DELETE_ONE,
    OP_INCREMENT,
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
    TAG_SEQ_INFO,
    TAG_SEQ_INFO_EPOCH,
    TAG_SEQ_INFO_ROW_INDEX,
    TAG_SEQ_INFO_TS,
    VT_AUTO_INCREMENT,
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INF_MAX,
    VT_INF_MIN,
    VT_INTEGER,
    VT_NULL,
    VT_STRING,
    Cell,
    CellSpec,
    PBRow,
    PKValue,
    PlainBufferError,
    Special,
    Value,
    crc8,
    crc8_byte,
)

__all__ = [
    "AUTO_INCREMENT",
    "CRC_TABLE",
    "CRC_TABLE2",
    "HEADER",
    "INF_MAX",
    "INF_MIN",
    "OP_DELETE_ALL",
    "OP_DELETE_ONE",
    "OP_INCREMENT",
    "TAG_CELL",
    "TAG_CELL_CHECKSUM",
    "TAG_CELL_NAME",
    "TAG_CELL_TIMESTAMP",
    "TAG_CELL_TYPE",
    "TAG_CELL_VALUE",
    "TAG_DELETE_ROW_MARKER",
    "TAG_EXTENSION",
    "TAG_ROW_CHECKSUM",
    "TAG_ROW_DATA",
    "TAG_ROW_PK",
    "TAG_SEQ_INFO",
    "TAG_SEQ_INFO_EPOCH",
    "TAG_SEQ_INFO_ROW_INDEX",
    "TAG_SEQ_INFO_TS",
    "VT_AUTO_INCREMENT",
    "VT_BLOB",
    "VT_BOOLEAN",
    "VT_DOUBLE",
    "VT_INF_MAX",
    "VT_INF_MIN",
    "VT_INTEGER",
    "VT_NULL",
    "VT_STRING",
    "Cell",
    "CellSpec",
    "PBRow",
    "PKValue",
    "PlainBufferError",
    "Special",
    "Value",
    "crc8",
    "crc8_byte",
    "decode_row",
    "decode_rows",
    "decode_variant",
    "encode_pk",
    "encode_row",
    "encode_row_body",
    "value_payload",
]
