"""PlainBuffer decoding: bytes of the table API and of tunnel records into :class:`Row` tuples, CRCs verified.

Decoding is the hot path of the tunnel consumer, so :func:`decode_rows` is one flat loop over ``bytes`` with
precompiled ``struct`` unpackers, cached column names and table-driven CRCs. The shared constants of
:mod:`~airflow_tablestore.client.plainbuffer.format` are bound as globals of this module (under their former
private names), so the loop does no attribute lookups.

The functions here are the pure-Python decoder (``*_python``); the public names ``decode_rows``,
``decode_record`` and ``decode_record_list`` are bound to the compiled equivalents of ``_speedups.c`` when that
extension is built (see :mod:`~airflow_tablestore.client.plainbuffer.implementation`): same rows, same errors.

This decoder is one of a deliberate pair: the emulator has its own, independent PlainBuffer implementation
(``airflow_tablestore/emulator/codec/``) on purpose, so that client and emulator test each other over the
wire. That pair and the ``.proto`` files are the only allowed duplicates in the project.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import Column, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.crc8 import CRC8_TABLE, crc8
from airflow_tablestore.client.plainbuffer.format import CELL_OP_PUT as _CELL_OP_PUT
from airflow_tablestore.client.plainbuffer.format import (
    HEADER,
    SEQ,
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
    VT_BLOB,
    VT_BOOLEAN,
    VT_DOUBLE,
    VT_INTEGER,
    VT_NULL,
    VT_STRING,
)
from airflow_tablestore.client.plainbuffer.format import LONG_VALUE as _LONG_VALUE
from airflow_tablestore.client.plainbuffer.format import NAME_CACHE_LIMIT as _NAME_CACHE_LIMIT
from airflow_tablestore.client.plainbuffer.format import OPS_BY_BYTE as _OPS_BY_BYTE
from airflow_tablestore.client.plainbuffer.format import SENTINEL_BY_TYPE as _SENTINEL_BY_TYPE
from airflow_tablestore.client.plainbuffer.format import SEQ_FIELDS as _SEQ_FIELDS
from airflow_tablestore.client.plainbuffer.format import SEQ_ONLY_PREFIX as _SEQ_ONLY_PREFIX
from airflow_tablestore.client.plainbuffer.format import ZERO8 as _ZERO8
from airflow_tablestore.client.plainbuffer.format import bad_tag as _bad_tag
from airflow_tablestore.client.plainbuffer.format import check_header as _check_header
from airflow_tablestore.client.plainbuffer.format import unpack_f64 as _unpack_f64
from airflow_tablestore.client.plainbuffer.format import unpack_i64 as _unpack_i64
from airflow_tablestore.client.plainbuffer.format import unpack_u32 as _unpack_u32
from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION, compiled_module

__all__ = [
    "IMPLEMENTATION",
    "decode_record",
    "decode_record_list",
    "decode_record_list_python",
    "decode_record_python",
    "decode_row",
    "decode_rows",
    "decode_rows_python",
    "gc_paused",
    "set_up_compiled",
]

_Buffer = bytes | bytearray | memoryview

_tuple_new = tuple.__new__

# Bound by assignment, not by ``import ... as``: CPython compiles ``name.method(...)`` on an imported
# name as an attribute load plus call (it assumes a module) instead of the cheaper method call.
_SEQ = SEQ

# Buffers at least this long are decoded with the cyclic GC paused (see gc_paused()).
_GC_PAUSE_BYTES = 16 * 1024

# ---- name cache: encoded cell name -> (name, CRC of the name bytes) ---------------------------------

_decode_names: dict[bytes, tuple[str, int]] = {}


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


# ---- decoding -------------------------------------------------------------------------------------------


def decode_rows_python(data: bytes | bytearray | memoryview) -> list[Row]:
    """The pure-Python :func:`decode_rows`: decode a PlainBuffer message (header + 0..n rows). Empty input gives ``[]``.

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


def decode_record_python(data: bytes | bytearray | memoryview) -> Row:
    """The pure-Python :func:`decode_record`: decode a tunnel/stream record (exactly one row, usually with the
    sequence-info extension)."""
    buf = data if type(data) is bytes else bytes(data)
    if buf[:4] != HEADER:
        _check_header(buf)
    rows = _decode_body(buf)
    if len(rows) != 1:
        raise PlainBufferError(f"a record must hold exactly one row, found {len(rows)}")
    return rows[0]


def decode_record_list_python(records: Iterable[bytes | bytearray | memoryview]) -> list[Row]:
    """The pure-Python :func:`decode_record_list`: :func:`decode_record` over a batch (e.g. one ReadRecords
    response), with the cyclic GC paused.

    Decoding allocates only acyclic tuples, so pausing the collector for the batch is safe and roughly halves
    the cost of large batches.
    """
    if not gc.isenabled():
        return [decode_record_python(record) for record in records]
    gc.disable()
    try:
        return [decode_record_python(record) for record in records]
    finally:
        gc.enable()


class _GcPause:
    """Context manager behind :func:`gc_paused` (a class: a generator-based one measurably slows the
    block)."""

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
                            value = None
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
                    if (
                        t_epoch != TAG_SEQ_INFO_EPOCH
                        or t_ts != TAG_SEQ_INFO_TS
                        or t_idx != TAG_SEQ_INFO_ROW_INDEX
                    ):
                        raise PlainBufferError(
                            f"malformed sequence info at offset {pos + 5}: expected tags 0d, 0e, 0f"
                        )
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
        raise PlainBufferError(
            f"string value in the row at offset {row_start} is not UTF-8: {exc.reason}"
        ) from None
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
                raise PlainBufferError(
                    f"sequence info at offset {p} has length {sub_end - p - 5}, expected 19"
                )
            _, _, t_epoch, epoch, t_ts, ts, t_idx, row_index = _SEQ.unpack_from(data, p)
            if (t_epoch, t_ts, t_idx) != (TAG_SEQ_INFO_EPOCH, TAG_SEQ_INFO_TS, TAG_SEQ_INFO_ROW_INDEX):
                raise PlainBufferError(f"malformed sequence info at offset {p}: expected tags 0d, 0e, 0f")
            sequence = SequenceInfo(epoch, ts, row_index)
        p = sub_end
    return sequence, end


# ---- the public names: compiled when available ------------------------------------------------------------

decode_rows: Callable[[_Buffer], list[Row]]
"""Decode a PlainBuffer message (header + 0..n rows). Empty input gives ``[]``.

Every cell and row CRC is verified; anything malformed raises :class:`PlainBufferError`.
"""
decode_record: Callable[[_Buffer], Row]
"""Decode a tunnel/stream record: exactly one row, usually with the sequence-info extension."""
decode_record_list: Callable[[Iterable[_Buffer]], list[Row]]
""":func:`decode_record` over a batch (e.g. one ReadRecords response), with the cyclic GC paused."""


def set_up_compiled(module: Any) -> None:
    """Hand the model classes and error helpers to a compiled ``_speedups`` module (idempotent)."""
    module.setup(
        row=Row,
        column=Column,
        sequence=SequenceInfo,
        error=PlainBufferError,
        bad_tag=_bad_tag,
        check_header=_check_header,
        put=_CELL_OP_PUT,
        ops=dict(_OPS_BY_BYTE),
        sentinels=dict(_SENTINEL_BY_TYPE),
    )


_compiled = compiled_module()
if _compiled is not None:
    set_up_compiled(_compiled)
    decode_rows = _compiled.decode_rows
    decode_record = _compiled.decode_record
    decode_record_list = _compiled.decode_record_list
else:
    decode_rows = decode_rows_python
    decode_record = decode_record_python
    decode_record_list = decode_record_list_python
