"""PlainBuffer codec API: the one import path for the row encoding of the table API and of tunnel records.

A facade over the codec's modules, each with one job: :mod:`~airflow_tablestore.client.plainbuffer_format`
(tags, value types, layouts), :mod:`~airflow_tablestore.client.plainbuffer_encode` (rows to bytes),
:mod:`~airflow_tablestore.client.plainbuffer_decode` (bytes to rows, the tunnel consumer's hot path) and
:mod:`~airflow_tablestore.client.plainbuffer_sqlvariant` (single filter/boundary values). The tag and
value-type constants are re-exported too. Import from here::

    from airflow_tablestore.client import plainbuffer as pb

    pb.decode_rows(pb.encode_row(row))
"""

from __future__ import annotations

from airflow_tablestore.client.deprecation import moved_names
from airflow_tablestore.client.plainbuffer_decode import (
    decode_record,
    decode_record_list,
    decode_row,
    decode_rows,
    gc_paused,
)
from airflow_tablestore.client.plainbuffer_encode import encode_primary_key, encode_row, encode_rows
from airflow_tablestore.client.plainbuffer_format import HEADER
from airflow_tablestore.client.plainbuffer_format import TAG_CELL as TAG_CELL
from airflow_tablestore.client.plainbuffer_format import TAG_CELL_CHECKSUM as TAG_CELL_CHECKSUM
from airflow_tablestore.client.plainbuffer_format import TAG_CELL_NAME as TAG_CELL_NAME
from airflow_tablestore.client.plainbuffer_format import TAG_CELL_TIMESTAMP as TAG_CELL_TIMESTAMP
from airflow_tablestore.client.plainbuffer_format import TAG_CELL_TYPE as TAG_CELL_TYPE
from airflow_tablestore.client.plainbuffer_format import TAG_CELL_VALUE as TAG_CELL_VALUE
from airflow_tablestore.client.plainbuffer_format import TAG_DELETE_ROW_MARKER as TAG_DELETE_ROW_MARKER
from airflow_tablestore.client.plainbuffer_format import TAG_EXTENSION as TAG_EXTENSION
from airflow_tablestore.client.plainbuffer_format import TAG_ROW_CHECKSUM as TAG_ROW_CHECKSUM
from airflow_tablestore.client.plainbuffer_format import TAG_ROW_DATA as TAG_ROW_DATA
from airflow_tablestore.client.plainbuffer_format import TAG_ROW_PK as TAG_ROW_PK
from airflow_tablestore.client.plainbuffer_format import TAG_SEQ_INFO as TAG_SEQ_INFO
from airflow_tablestore.client.plainbuffer_format import TAG_SEQ_INFO_EPOCH as TAG_SEQ_INFO_EPOCH
from airflow_tablestore.client.plainbuffer_format import TAG_SEQ_INFO_ROW_INDEX as TAG_SEQ_INFO_ROW_INDEX
from airflow_tablestore.client.plainbuffer_format import TAG_SEQ_INFO_TS as TAG_SEQ_INFO_TS
from airflow_tablestore.client.plainbuffer_format import VT_AUTO_INCREMENT as VT_AUTO_INCREMENT
from airflow_tablestore.client.plainbuffer_format import VT_BLOB as VT_BLOB
from airflow_tablestore.client.plainbuffer_format import VT_BOOLEAN as VT_BOOLEAN
from airflow_tablestore.client.plainbuffer_format import VT_DOUBLE as VT_DOUBLE
from airflow_tablestore.client.plainbuffer_format import VT_INF_MAX as VT_INF_MAX
from airflow_tablestore.client.plainbuffer_format import VT_INF_MIN as VT_INF_MIN
from airflow_tablestore.client.plainbuffer_format import VT_INTEGER as VT_INTEGER
from airflow_tablestore.client.plainbuffer_format import VT_NULL as VT_NULL
from airflow_tablestore.client.plainbuffer_format import VT_STRING as VT_STRING
from airflow_tablestore.client.plainbuffer_sqlvariant import decode_sql_variant, encode_sql_variant

__all__ = [
    "HEADER",
    "decode_record",
    "decode_record_list",
    "decode_row",
    "decode_rows",
    "decode_sql_variant",
    "encode_primary_key",
    "encode_row",
    "encode_rows",
    "encode_sql_variant",
    "gc_paused",
]

__getattr__ = moved_names(__name__, {
    "PlainBufferError": "airflow_tablestore.client.errors:PlainBufferError",
    "crc8": "airflow_tablestore.client.crc8:crc8",
    "CRC8_TABLE": "airflow_tablestore.client.crc8:CRC8_TABLE",
    "zero_table": "airflow_tablestore.client.crc8:zero_table",
})
