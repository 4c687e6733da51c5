"""ReadRecords answers assembled as bytes: stored records framed with cached protobuf prefixes.

A 1 000-record answer built with the generated module costs a message object per record; here each record's
``records`` entry is a prefix that depends only on the record's action and length (field tags and lengths,
plus the PlainBuffer header for a stored row body) followed by the record's stored bytes, and the prefixes
are looked up with ``map``, not built in a Python loop. The field numbers come from the generated descriptors
(the one wire definition, :mod:`..wire`), and the result is byte for byte what ``SerializeToString`` gives for the same
response (tests/emulator/tunnel/test_record_entries.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

from airflow_tablestore.emulator.codec.format import HEADER
from airflow_tablestore.emulator.wire import field_tag, varint
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs


_RECORDS = field_tag(tunnel_pb2.ReadRecordsResponse, "records")
_ACTION = field_tag(tunnel_pb2.Record, "action_type")
_RECORD = field_tag(tunnel_pb2.Record, "record")
_MAX_SIZES = 65536  # prefixes kept: sizes repeat, but a table of varied rows must not grow the table forever


class _Prefixes(dict[int, bytes]):
    """``records`` entry prefixes by ``action << 32 | length`` of the stored bytes (``headed``: whole
    PlainBuffers, else row bodies the header goes after the prefix)."""

    def __init__(self, headed: bool) -> None:
        super().__init__()
        self.extra = b"" if headed else HEADER

    def __missing__(self, key: int) -> bytes:
        action, length = key >> 32, (key & 0xFFFFFFFF) + len(self.extra)
        inner = _ACTION + varint(action) + _RECORD + varint(length)
        prefix = _RECORDS + varint(len(inner) + length) + inner + self.extra
        if len(self) < _MAX_SIZES:
            self[key] = prefix
        return prefix


_PREFIXES = {True: _Prefixes(True), False: _Prefixes(False)}
_PUT_ROW = 1 << 32  # the PUT_ROW action's part of a prefix key


def put_row_entries(bodies: Sequence[bytes], actions: Sequence[int]) -> tuple[list[bytes], list[int]]:
    """Row bodies as PUT_ROW ``records`` entries: the parts to join and each entry's size (a snapshot's
    :class:`~airflow_tablestore.emulator.store.read_cache.EncodedRun` frame; ``actions`` is not used)."""
    heads = list(map(_PREFIXES[False].__getitem__, map(_PUT_ROW.__or__, map(len, bodies))))
    return _interleaved(heads, bodies)


def stream_entries(records: Sequence[bytes], actions: Sequence[int]) -> tuple[list[bytes], list[int]]:
    """Stream records (whole PlainBuffers) as ``records`` entries of their actions (a stream partition's
    :class:`~airflow_tablestore.emulator.store.read_cache.EncodedRun` frame)."""
    keys = [action << 32 | size for action, size in zip(actions, map(len, records), strict=True)]
    return _interleaved(list(map(_PREFIXES[True].__getitem__, keys)), records)


def _interleaved(heads: list[bytes], bodies: Sequence[bytes]) -> tuple[list[bytes], list[int]]:
    return (list(chain.from_iterable(zip(heads, bodies, strict=True))),
            list(map(int.__add__, map(len, heads), map(len, bodies))))


class RecordEntries:
    """The records of one ReadRecords answer, then :meth:`response` for its serialized bytes."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.nbytes = 0  # the records' PlainBuffer bytes (the 4 MB answer limit counts these)

    def add(self, action: int, record: bytes, *, headed: bool = True) -> None:
        """Append one record: a whole PlainBuffer (``headed``) or a row body the header goes before."""
        self.parts += (_PREFIXES[headed][action << 32 | len(record)], record)
        self.nbytes += len(record) + (0 if headed else len(HEADER))

    def extend(self, action: int, records: Sequence[bytes], *, headed: bool = True) -> None:
        """Append records of one action, as :meth:`add` each, without a Python call per record."""
        sizes = list(map(len, records))
        base = action << 32
        keys = map(base.__or__, sizes)
        self.parts += chain.from_iterable(zip(map(_PREFIXES[headed].__getitem__, keys), records, strict=True))
        self.nbytes += sum(sizes) + (0 if headed else len(HEADER) * len(sizes))

    def extend_mixed(self, actions: Sequence[int], records: Sequence[bytes]) -> None:
        """Append whole PlainBuffers, each with its own action, as :meth:`add` each."""
        sizes = list(map(len, records))
        keys = [action << 32 | size for action, size in zip(actions, sizes, strict=True)]
        self.parts += chain.from_iterable(zip(map(_PREFIXES[True].__getitem__, keys), records, strict=True))
        self.nbytes += sum(sizes)

    def add_entries(self, entries: bytes | memoryview) -> None:
        """Append records already framed as entries (the answer's last records: ``nbytes`` is not kept)."""
        self.parts.append(entries)

    def response(self, next_token: str, more: bool) -> bytes:
        """The serialized ReadRecordsResponse: the records (field 1) first, as the canonical encoding has it."""
        tail = tunnel_pb2.ReadRecordsResponse(next_token=next_token, may_more_record=more).SerializeToString()
        self.parts.append(tail)
        return b"".join(self.parts)
