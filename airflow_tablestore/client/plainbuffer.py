"""PlainBuffer: the row encoding of the Tablestore table API and of tunnel records.

A message is the header ``75 00 00 00`` followed by rows::

    row  = 01 pk_cell* [02 data_cell+] [08] [0B ext_len:u32 (0C 13000000 0D epoch 0E ts 0F idx)] 09 row_crc
    cell = 03 04 name_len:u32 name [05 len:u32 type payload] [06 op] [07 ts:i64] 0A cell_crc

Integers are little-endian. The cell CRC-8 covers the name, the value's type byte and payload, the timestamp
and then the op byte; the row CRC-8 folds the cell CRCs and a ``01``/``00`` delete-marker byte (the extension
is not covered). Values map by Python type: ``int`` INTEGER, ``float`` DOUBLE, ``bool`` BOOLEAN, ``str``
STRING, ``bytes`` BINARY, plus the primary-key sentinels ``INF_MIN``, ``INF_MAX`` and ``AUTO_INCREMENT``.

Decoding is the hot path of the tunnel consumer, so :func:`decode_rows` is one flat loop over ``bytes`` with
precompiled ``struct`` unpackers, cached column names and table-driven CRCs.

Size (~740 lines): the encoder and the decoder of one wire format, kept in one module because both are
hot paths tuned together (shared tag tables and CRC tables); splitting encoder and decoder is planned in
issue 13 (structure), with the PlainBuffer benchmark run before and after.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from airflow_tablestore.client.crc8 import CRC8_TABLE, crc8, zero_table
from airflow_tablestore.client.errors import PlainBufferError, TablestoreClientError
from airflow_tablestore.client.model import (
    AUTO_INCREMENT,
    INF_MAX,
    INF_MIN,
    CellOp,
    Column,
    PrimaryKey,
    Row,
    SequenceInfo,
)

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

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_SEQ = struct.Struct("<BIBiBqBi")  # 0C len 0D epoch 0E ts 0F row_index
_SEQ_FIELDS = struct.Struct("<BiBqBi")  # 0D epoch 0E ts 0F row_index
_SEQ_ONLY_PREFIX = b"\x18\x00\x00\x00\x0c\x13\x00\x00\x00"  # ext_len 24, SEQ_INFO, seq_len 19

_pack_string_value = struct.Struct("<BIBI").pack  # 05 len 03 n (the bytes follow)
_pack_int_value = struct.Struct("<BIBq").pack  # 05 09000000 00 int64
_pack_double_value = struct.Struct("<BIBd").pack  # 05 09000000 01 float64
_pack_timestamp = struct.Struct("<Bq").pack  # 07 int64
_CELL_CHECKSUMS = [bytes((0x0A, crc)) for crc in range(256)]
_last_timestamp: tuple[int | None, bytes, int] = (None, b"", 0)  # (timestamp, 07 + int64, CRC of the int64)

_unpack_u32 = _U32.unpack_from
_unpack_i64 = _I64.unpack_from
_unpack_f64 = _F64.unpack_from
_pack_u32 = _U32.pack
_pack_i64 = _I64.pack

_tuple_new = tuple.__new__

_OPS_BY_BYTE: dict[int, CellOp] = {
    int(CellOp.DELETE_ALL_VERSIONS): CellOp.DELETE_ALL_VERSIONS,
    int(CellOp.DELETE_ONE_VERSION): CellOp.DELETE_ONE_VERSION,
    int(CellOp.INCREMENT): CellOp.INCREMENT,
}
_SENTINEL_BY_TYPE: dict[int, Any] = {VT_INF_MIN: INF_MIN, VT_INF_MAX: INF_MAX, VT_AUTO_INCREMENT: AUTO_INCREMENT}

_CELL_OP_PUT = CellOp.PUT
_ZERO8 = zero_table(8)

# Buffers at least this long are decoded with the cyclic GC paused (see gc_paused()).
_GC_PAUSE_BYTES = 16 * 1024

# Long values: from this length on crc8() folds block-wise in C, faster than the inline byte loop.
_LONG_VALUE = 80

# ---- name cache: encoded cell name -> (name, CRC of the name bytes) ---------------------------------

_NAME_CACHE_LIMIT = 100_000
_decode_names: dict[bytes, tuple[str, int]] = {}
_encode_names: dict[str, tuple[bytes, int]] = {}


def _decoded_name(key: bytes, offset: int) -> tuple[str, int]:
    raw = key[5:]  # key = 04 len:u32 name
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlainBufferError(f"cell name at offset {offset} is not valid UTF-8: {exc.reason}") from None
    entry = (name, crc8(raw))
    if len(_decode_names) >= _NAME_CACHE_LIMIT:
        _decode_names.clear()
    _decode_names[key] = entry
    return entry


# ---- errors --------------------------------------------------------------------------------------------


def _tag_name(tag: int) -> str:
    return _TAG_NAMES.get(tag, "unknown")


def _bad_tag(data: bytes, pos: int, expected: str) -> PlainBufferError:
    if pos >= len(data):
        return PlainBufferError(f"input truncated at offset {pos} (length {len(data)}): expected {expected}")
    tag = data[pos]
    return PlainBufferError(
        f"unexpected tag 0x{tag:02x} ({_tag_name(tag)}) at offset {pos}: expected {expected}"
    )


def _check_header(data: bytes) -> None:
    if data[:4] != HEADER:
        raise PlainBufferError(
            f"bad PlainBuffer header {data[:4].hex() or '(empty)'}: expected {HEADER.hex()} at offset 0"
        )


# ---- decoding -------------------------------------------------------------------------------------------


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    return data if type(data) is bytes else bytes(data)


def decode_rows(data: bytes | bytearray | memoryview) -> list[Row]:
    """Decode a PlainBuffer message (header + 0..n rows). Empty input gives ``[]``.

    Every cell and row CRC is verified; anything malformed raises :class:`PlainBufferError`.
    """
    if not data:
        return []
    buf = data if type(data) is bytes else bytes(data)
    if buf[:4] != HEADER:
        _check_header(buf)
    if len(buf) < _GC_PAUSE_BYTES or not gc.isenabled():
        return _decode_body(buf)
    gc.disable()
    try:
        return _decode_body(buf)
    finally:
        gc.enable()


def decode_row(data: bytes | bytearray | memoryview) -> Row | None:
    """Decode a PlainBuffer holding at most one row (``None`` for empty input or a bare header)."""
    rows = decode_rows(data)
    if len(rows) > 1:
        raise PlainBufferError(f"expected at most one row, found {len(rows)}")
    return rows[0] if rows else None


def decode_record(data: bytes | bytearray | memoryview) -> Row:
    """Decode a tunnel/stream record: exactly one row, usually with the sequence-info extension."""
    buf = data if type(data) is bytes else bytes(data)
    if buf[:4] != HEADER:
        _check_header(buf)
    rows = _decode_body(buf)
    if len(rows) != 1:
        raise PlainBufferError(f"a record must hold exactly one row, found {len(rows)}")
    return rows[0]


def decode_record_list(records: Iterable[bytes | bytearray | memoryview]) -> list[Row]:
    """:func:`decode_record` over a batch (e.g. one ReadRecords response), with the cyclic GC paused.

    Decoding allocates only acyclic tuples, so pausing the collector for the batch is safe and roughly halves
    the cost of large batches.
    """
    if not gc.isenabled():
        return [decode_record(record) for record in records]
    gc.disable()
    try:
        return [decode_record(record) for record in records]
    finally:
        gc.enable()


class _GcPause:
    """Context manager behind :func:`gc_paused` (a class: a generator-based one measurably slows the block)."""

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._was_enabled:
            gc.enable()


def gc_paused() -> AbstractContextManager[None]:
    """Pause Python's cyclic garbage collector for a block that allocates many acyclic objects.

    Decoding a large batch creates hundreds of thousands of tuples; each allocation burst otherwise triggers
    collections that rescan every live object. Use it around a loop that decodes many records. Nestable; the
    collector's previous state is restored on exit, also after an exception.
    """
    return _GcPause()


def _decode_body(data: bytes) -> list[Row]:  # noqa: C901 - one flat loop on purpose (hot path)
    table = CRC8_TABLE
    names = _decode_names
    unpack_u32 = _unpack_u32
    unpack_i64 = _unpack_i64
    unpack_f64 = _unpack_f64
    tuple_new = _tuple_new
    column_cls = Column
    row_cls = Row
    put = _CELL_OP_PUT
    ops = _OPS_BY_BYTE
    sentinels = _SENTINEL_BY_TYPE
    long_value = _LONG_VALUE
    zero8 = _ZERO8
    unpack_seq = _SEQ_FIELDS.unpack_from
    sequence_cls = SequenceInfo
    last_ts: int | None = None
    ts_crc = 0

    n = len(data)
    rows: list[Row] = []
    append_row = rows.append
    pos = 4
    row_start = pos
    try:
        while pos < n:
            row_start = pos
            if data[pos] != TAG_ROW_PK:
                raise _bad_tag(data, pos, "ROW_PK (0x01) starting a row")
            pos += 1
            row_crc = 0
            pk: list[tuple[str, Any]] = []
            columns: list[Column] = []
            in_pk = True
            target: list[Any] = pk
            tag = data[pos]
            while True:
                if tag == TAG_CELL:
                    # -- one cell: 03 04 len name [05 len type payload] [06 op] [07 ts] 0A crc
                    # The cache key includes the CELL_NAME tag and length, so a hit also validates them.
                    end = pos + 6 + unpack_u32(data, pos + 2)[0]
                    entry = names.get(data[pos + 1 : end])
                    if entry is None:
                        if data[pos + 1] != TAG_CELL_NAME:
                            raise _bad_tag(data, pos + 1, "CELL_NAME (0x04)")
                        if end > n:
                            raise IndexError
                        entry = _decoded_name(data[pos + 1 : end], pos + 6)
                    name, crc = entry
                    pos = end
                    tag = data[pos]
                    value: Any
                    if tag == TAG_CELL_VALUE:
                        vs = pos + 5
                        vt = data[vs]
                        if vt == VT_STRING:
                            ve = vs + 5 + unpack_u32(data, vs + 1)[0]
                            if ve > n:
                                raise IndexError
                            value = data[vs + 5 : ve].decode("utf-8")
                        elif vt == VT_INTEGER:
                            value = unpack_i64(data, vs + 1)[0]
                            ve = vs + 9
                        elif vt == VT_DOUBLE:
                            value = unpack_f64(data, vs + 1)[0]
                            ve = vs + 9
                        elif vt == VT_BOOLEAN:
                            value = data[vs + 1] != 0
                            ve = vs + 2
                        elif vt == VT_BLOB:
                            ve = vs + 5 + unpack_u32(data, vs + 1)[0]
                            if ve > n:
                                raise IndexError
                            value = data[vs + 5 : ve]
                        elif vt in sentinels:
                            value = sentinels[vt]
                            ve = vs + 1
                        elif vt == VT_NULL:
                            ve = vs + 1
                        else:
                            raise PlainBufferError(f"unknown value type 0x{vt:02x} at offset {vs}")
                        if ve - vs < long_value:
                            for byte in data[vs:ve]:
                                crc = table[crc ^ byte]
                        else:
                            crc = crc8(data[vs:ve], crc)
                        pos = ve
                        tag = data[pos]
                    else:
                        value = None
                    if tag == TAG_CELL_TIMESTAMP:  # the usual case: a version, no cell op
                        op = put
                        timestamp = unpack_i64(data, pos + 1)[0]
                        # Cells of a row usually share a timestamp: reuse the CRC of its 8 bytes (linearity).
                        if timestamp != last_ts:
                            last_ts = timestamp
                            ts_crc = 0
                            for byte in data[pos + 1 : pos + 9]:
                                ts_crc = table[ts_crc ^ byte]
                        crc = zero8[crc] ^ ts_crc
                        pos += 9
                        tag = data[pos]
                    elif tag == TAG_CELL_TYPE:  # update/delete cells: op, then maybe a timestamp
                        op_byte = data[pos + 1]
                        op = ops.get(op_byte)  # type: ignore[assignment]
                        if op is None:
                            raise PlainBufferError(f"unknown cell op 0x{op_byte:02x} at offset {pos + 1}")
                        pos += 2
                        tag = data[pos]
                        timestamp = None
                        if tag == TAG_CELL_TIMESTAMP:
                            timestamp = unpack_i64(data, pos + 1)[0]
                            for byte in data[pos + 1 : pos + 9]:
                                crc = table[crc ^ byte]
                            pos += 9
                            tag = data[pos]
                        crc = table[crc ^ op_byte]  # the op byte is checksummed after the timestamp
                    else:
                        op = put
                        timestamp = None
                    if tag != TAG_CELL_CHECKSUM:
                        raise _bad_tag(data, pos, "CELL_CHECKSUM (0x0a) or a cell field")
                    if data[pos + 1] != crc:
                        raise PlainBufferError(
                            f"cell checksum mismatch for column {name!r} at offset {pos + 1}: "
                            f"stored 0x{data[pos + 1]:02x}, computed 0x{crc:02x}"
                        )
                    row_crc = table[row_crc ^ crc]
                    pos += 2
                    if in_pk:
                        target.append((name, value))
                    else:
                        target.append(tuple_new(column_cls, (name, value, timestamp, op)))
                    tag = data[pos]
                elif tag == TAG_ROW_DATA and in_pk:
                    in_pk = False
                    target = columns
                    pos += 1
                    tag = data[pos]
                else:
                    break
            delete_marker = False
            if tag == TAG_DELETE_ROW_MARKER:
                delete_marker = True
                row_crc = table[row_crc ^ 1]
                pos += 1
                tag = data[pos]
            else:
                row_crc = table[row_crc]
            sequence = None
            if tag == TAG_EXTENSION:
                if data[pos + 1 : pos + 10] == _SEQ_ONLY_PREFIX:
                    # The usual extension: sequence info only (0B 18000000 0C 13000000 0D .. 0E .. 0F ..).
                    t_epoch, epoch, t_ts, ts, t_idx, row_index = unpack_seq(data, pos + 10)
                    if t_epoch != TAG_SEQ_INFO_EPOCH or t_ts != TAG_SEQ_INFO_TS or t_idx != TAG_SEQ_INFO_ROW_INDEX:
                        raise PlainBufferError(f"malformed sequence info at offset {pos + 5}: expected tags 0d, 0e, 0f")
                    sequence = tuple_new(sequence_cls, (epoch, ts, row_index))
                    pos += 29
                else:
                    sequence, pos = _decode_extension(data, pos)
                tag = data[pos]
            if tag != TAG_ROW_CHECKSUM:
                expected = "ROW_CHECKSUM (0x09)"
                if in_pk:
                    expected = "CELL, ROW_DATA, DELETE_ROW_MARKER, EXTENSION or " + expected
                raise _bad_tag(data, pos, expected)
            if data[pos + 1] != row_crc:
                raise PlainBufferError(
                    f"row checksum mismatch for the row starting at offset {row_start}: stored "
                    f"0x{data[pos + 1]:02x}, computed 0x{row_crc:02x}"
                )
            pos += 2
            append_row(tuple_new(row_cls, (tuple(pk), tuple(columns), delete_marker, sequence)))
    except (IndexError, struct.error):
        raise PlainBufferError(
            f"input truncated: the row starting at offset {row_start} runs past the end of the "
            f"{n}-byte buffer"
        ) from None
    except UnicodeDecodeError as exc:
        raise PlainBufferError(f"string value in the row at offset {row_start} is not UTF-8: {exc.reason}") from None
    return rows


def _decode_extension(data: bytes, pos: int) -> tuple[SequenceInfo | None, int]:
    """Parse ``0B len sub-blocks`` at ``pos``; unknown sub-blocks are skipped by their length."""
    end = pos + 5 + _unpack_u32(data, pos + 1)[0]
    if end > len(data):
        raise IndexError
    sequence = None
    p = pos + 5
    while p < end:
        sub_tag = data[p]
        sub_end = p + 5 + _unpack_u32(data, p + 1)[0]
        if sub_end > end:
            raise PlainBufferError(f"extension block at offset {p} overruns the extension ending at {end}")
        if sub_tag == TAG_SEQ_INFO:
            if sub_end - p != _SEQ.size:
                raise PlainBufferError(f"sequence info at offset {p} has length {sub_end - p - 5}, expected 19")
            _, _, t_epoch, epoch, t_ts, ts, t_idx, row_index = _SEQ.unpack_from(data, p)
            if (t_epoch, t_ts, t_idx) != (TAG_SEQ_INFO_EPOCH, TAG_SEQ_INFO_TS, TAG_SEQ_INFO_ROW_INDEX):
                raise PlainBufferError(f"malformed sequence info at offset {p}: expected tags 0d, 0e, 0f")
            sequence = SequenceInfo(epoch, ts, row_index)
        p = sub_end
    return sequence, end


# ---- encoding -------------------------------------------------------------------------------------------


def _name_prefix(name: str) -> tuple[bytes, int]:
    """``03 04 len name`` and the CRC of the name bytes, cached per name."""
    entry = _encode_names.get(name)
    if entry is None:
        if type(name) is not str:
            if not isinstance(name, str):
                raise TablestoreClientError(f"column name {name!r} must be a str, got {type(name).__name__}")
            name = str(name)
        raw = name.encode("utf-8")
        entry = (b"\x03\x04" + _pack_u32(len(raw)) + raw, crc8(raw))
        if len(_encode_names) >= _NAME_CACHE_LIMIT:
            _encode_names.clear()
        _encode_names[name] = entry
    return entry


def _value_segment(value: Any, column: str, *, primary_key: bool) -> bytes:
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
        return bytes((VT_INF_MIN if value is INF_MIN else VT_INF_MAX if value is INF_MAX else VT_AUTO_INCREMENT,))
    # Subclasses and buffer types (check bool before int: bool is an int subclass).
    if isinstance(value, bool):
        return b"\x02\x01" if value else b"\x02\x00"
    if isinstance(value, int):
        return _value_segment(int(value), column, primary_key=primary_key)
    if isinstance(value, float):
        return b"\x01" + _F64.pack(value)
    if isinstance(value, str):
        return _value_segment(str(value), column, primary_key=primary_key)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _value_segment(bytes(value), column, primary_key=primary_key)
    raise TablestoreClientError(
        f"column {column!r}: unsupported value type {type(value).__name__} "
        "(use int, float, bool, str or bytes)"
    )


def _encode_cell(
    out: list[bytes], name: str, value: Any, timestamp: int | None, op: int, *, primary_key: bool
) -> int:
    """Append one cell to ``out``; return its CRC. Inline fast paths for str, int and float values."""
    table = CRC8_TABLE
    prefix, crc = _name_prefix(name)
    out.append(prefix)
    if value is not None:
        kind = type(value)
        if kind is str:
            raw = value.encode("utf-8")
            size = len(raw)
            head = _pack_string_value(TAG_CELL_VALUE, size + 5, VT_STRING, size)
            out.append(head)
            out.append(raw)
            for byte in head[5:]:
                crc = table[crc ^ byte]
            if size < _LONG_VALUE:
                for byte in raw:
                    crc = table[crc ^ byte]
            else:
                crc = crc8(raw, crc)
        elif kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise TablestoreClientError(f"column {name!r}: integer {value} is outside the int64 range")
            cell_value = _pack_int_value(TAG_CELL_VALUE, 9, VT_INTEGER, value)
            out.append(cell_value)
            for byte in cell_value[5:]:
                crc = table[crc ^ byte]
        elif kind is float:
            cell_value = _pack_double_value(TAG_CELL_VALUE, 9, VT_DOUBLE, value)
            out.append(cell_value)
            for byte in cell_value[5:]:
                crc = table[crc ^ byte]
        else:
            segment = _value_segment(value, name, primary_key=primary_key)
            out.append(b"\x05" + _pack_u32(len(segment)) + segment)
            crc = crc8(segment, crc)
    if op:
        out.append(bytes((TAG_CELL_TYPE, op)))
    if timestamp is not None:
        if type(timestamp) is not int:
            if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                raise TablestoreClientError(f"column {name!r}: timestamp must be an int (milliseconds)")
            timestamp = int(timestamp)
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise TablestoreClientError(f"column {name!r}: timestamp {timestamp} is outside the int64 range")
        global _last_timestamp
        cached = _last_timestamp  # cells of a row usually share a timestamp: reuse bytes and CRC
        if cached[0] != timestamp:
            cell_ts = _pack_timestamp(TAG_CELL_TIMESTAMP, timestamp)
            ts_crc = 0
            for byte in cell_ts[1:]:
                ts_crc = table[ts_crc ^ byte]
            cached = _last_timestamp = (timestamp, cell_ts, ts_crc)
        out.append(cached[1])
        crc = _ZERO8[crc] ^ cached[2]
    if op:
        crc = table[crc ^ op]
    out.append(_CELL_CHECKSUMS[crc])
    return crc


def _encode_row_into(out: list[bytes], row: Row) -> None:
    table = CRC8_TABLE
    row_crc = 0
    out.append(b"\x01")
    for item in row.primary_key:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TablestoreClientError(
                f"primary key entries must be (name, value) pairs, got {item!r}"
            ) from None
        if value is None:
            raise TablestoreClientError(f"primary key column {name!r} has no value")
        row_crc = table[row_crc ^ _encode_cell(out, name, value, None, 0, primary_key=True)]
    if row.columns:
        out.append(b"\x02")
        for column in row.columns:
            if type(column) is not Column:
                column = _as_column(column)
            column_name, column_value, timestamp, cell_op = column
            if cell_op is _CELL_OP_PUT:
                if column_value is None:
                    raise TablestoreClientError(f"column {column_name!r}: a PUT cell needs a value")
                op = 0
            else:
                op = _checked_op(column_name, column_value, cell_op)
            crc = _encode_cell(out, column_name, column_value, timestamp, op, primary_key=False)
            row_crc = table[row_crc ^ crc]
    if row.delete_marker:
        out.append(b"\x08")
        row_crc = table[row_crc ^ 1]
    else:
        row_crc = table[row_crc]
    if row.sequence is not None:
        out.append(_encode_sequence(row.sequence))
    out.append(bytes((TAG_ROW_CHECKSUM, row_crc)))


def _as_column(column: Any) -> Column:
    try:
        return Column(*column)
    except TypeError:
        raise TablestoreClientError(
            f"columns must be Column(name, value, timestamp, op) tuples, got {column!r}"
        ) from None


def _checked_op(name: str, value: Any, cell_op: Any) -> int:
    """The op byte of a cell (0 for PUT), after checking that the value fits the op."""
    try:
        op = CellOp(cell_op)
    except ValueError:
        raise TablestoreClientError(f"column {name!r}: unknown cell op {cell_op!r}") from None
    if op in (CellOp.PUT, CellOp.INCREMENT):
        if value is None:
            raise TablestoreClientError(f"column {name!r}: {op.name} cells need a value")
    elif value is not None:
        raise TablestoreClientError(f"column {name!r}: {op.name} cells take no value")
    if op == CellOp.INCREMENT and (not isinstance(value, int) or isinstance(value, bool)):
        raise TablestoreClientError(f"column {name!r}: INCREMENT needs an int, got {type(value).__name__}")
    return int(op)


def _encode_sequence(sequence: SequenceInfo) -> bytes:
    epoch, timestamp, row_index = sequence
    for label, number, low, high in (
        ("epoch", epoch, _INT32_MIN, _INT32_MAX),
        ("timestamp", timestamp, _INT64_MIN, _INT64_MAX),
        ("row_index", row_index, _INT32_MIN, _INT32_MAX),
    ):
        if not isinstance(number, int) or not low <= number <= high:
            raise TablestoreClientError(f"sequence info {label} {number!r} is out of range")
    body = _SEQ.pack(
        TAG_SEQ_INFO, 19, TAG_SEQ_INFO_EPOCH, epoch, TAG_SEQ_INFO_TS, timestamp, TAG_SEQ_INFO_ROW_INDEX, row_index
    )
    return b"\x0b" + _pack_u32(len(body)) + body


def encode_row(row: Row) -> bytes:
    """Encode one row with the header: PutRow/UpdateRow rows, DeleteRow/GetRow keys, GetRange bounds."""
    out = [HEADER]
    _encode_row_into(out, row)
    return b"".join(out)


def encode_rows(rows: Iterable[Row]) -> bytes:
    """Encode several rows behind one header (the GetRange response layout)."""
    out = [HEADER]
    for row in rows:
        _encode_row_into(out, row)
    return b"".join(out)


def encode_primary_key(primary_key: PrimaryKey | Iterable[tuple[str, Any]]) -> bytes:
    """Encode a primary key alone (GetRow key, GetRange bound with ``INF_MIN``/``INF_MAX``)."""
    return encode_row(Row(tuple(primary_key)))


# ---- SQLVariant (filter values, partition bounds): type byte + payload, no tags -------------------------


def encode_sql_variant(value: Any) -> bytes:
    """Encode a filter/condition value: type byte + payload. ``INF_MIN``/``INF_MAX`` are allowed."""
    if value is AUTO_INCREMENT:
        raise TablestoreClientError("AUTO_INCREMENT cannot be used as a filter or boundary value")
    if value is None:
        raise TablestoreClientError("a filter value cannot be None")
    return _value_segment(value, "(filter value)", primary_key=True)


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
