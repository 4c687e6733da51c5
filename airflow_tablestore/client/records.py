"""Tunnel records: :class:`Records`, the one batch type of a ReadRecords answer, and the decoding of ``Record``
protobufs into model :class:`~airflow_tablestore.client.model.Record` tuples.

A :class:`Records` batch keeps an answer's records as their PlainBuffer bodies: where the compiled module is in use
the answer's bytes are split in C (:func:`split_read_records`) and no Python object is made per record. It is a
sequence of :class:`~airflow_tablestore.client.model.Record` decoded on first use (in C, or by
:func:`decode_records`' loop: the CRC-checked decode, the action enum looked up in a prebuilt table, the cyclic GC
paused), and Spark turns it straight into Arrow (``spark/arrow/changes.py``, ``spark/arrow/values.py``)
without decoding.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, overload

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import ActionType, Record
from airflow_tablestore.client.plainbuffer.decode import decode_record, gc_paused
from airflow_tablestore.client.plainbuffer.implementation import compiled_module

_ACTIONS = {a.value: a for a in ActionType}


def decode_records(messages: Iterable[Any]) -> list[Record]:
    """Decode ``ots_tunnel_pb2.Record`` messages in order. Base-data records have ``sequence=None``;
    ``origin_columns`` is set only when the record carries an ``origin_record``."""
    return _decode((msg.action_type, msg.record, msg.origin_record) for msg in messages)


def _decode(parts: Iterable[tuple[int, bytes, bytes | None]]) -> list[Record]:
    out: list[Record] = []
    append = out.append
    actions = _ACTIONS
    with gc_paused():
        for action_type, body, origin_body in parts:
            action = actions.get(action_type)
            if action is None:
                raise PlainBufferError(f"unknown tunnel record action type {action_type}")
            row = decode_record(body)
            origin = decode_record(origin_body).columns if origin_body else None
            append(Record(action, row.primary_key, row.columns, row.sequence, origin))
    return out


def decode_record_message(msg: Any) -> Record:
    """Decode one ``ots_tunnel_pb2.Record`` message."""
    return decode_records((msg,))[0]


_compiled = compiled_module()
_scan = getattr(_compiled, "scan_records", None)
_shift = getattr(_compiled, "shift_spans", None)
_split = getattr(_compiled, "split_read_records", None)
_decode_in = getattr(_compiled, "decode_records", None)
_MEMBERS = (None, *(_ACTIONS[value] for value in (1, 2, 3)))  # decode_records' action by type byte
_SPAN = struct.Struct("=qq")


def pack_spans(sizes: Iterable[int], start: int = 0) -> bytes:
    """The (start, end) pairs of pieces of ``sizes`` bytes laid end to end from ``start``."""
    ends = list(accumulate(sizes, initial=start))
    return array("q", [x for pair in zip(ends, ends[1:], strict=False) for x in pair]).tobytes()


def _shifted(spans: bytes, delta: int) -> bytes:
    if not delta:
        return spans
    if _shift is not None:
        return bytes(_shift(spans, delta))
    return array("q", [x + delta for x in array("q", spans)]).tobytes()


class Records(Sequence[Record]):
    """One ReadRecords answer's records (or several joined): each record's PlainBuffer body as a place in one buffer,
    decoded to :class:`~airflow_tablestore.client.model.Record` tuples on first use.

    ``data`` holds the bodies (where the compiled module is in use, the answer's own bytes: nothing is copied or
    made per record); ``spans`` gives record i's body as ``data[start:end]`` for its native int64 (start, end)
    pair; ``actions`` is one action-type byte per record. :meth:`decode` (and iterating, indexing) gives exactly
    what :func:`decode_records` gives (errors included); slicing keeps the records encoded; :meth:`scan` reads the
    sequence timestamps without decoding (in C where the compiled decoder is in use), having checked that every
    record decodes. Build it with :meth:`from_bodies`, :meth:`from_messages` or :func:`split_read_records`.
    """

    __slots__ = ("data", "spans", "actions", "origin_spans", "_decoded", "_raw_actions")

    def __init__(self, data: bytes, spans: bytes, actions: bytes, origin_spans: bytes | None = None,
                 decoded: list[Record] | None = None) -> None:
        if len(spans) != 16 * len(actions) or (origin_spans is not None and len(origin_spans) != len(spans)):
            raise ValueError("Records: spans, actions and origin spans must have one entry per record")
        self.data = data
        self.spans = spans
        self.actions = actions
        """One byte per record: its action type (0 stands for a type outside 0..255, which decode() reports)."""
        self.origin_spans = origin_spans
        """Each record's origin record as a (start, end) pair in ``data`` (empty for none), or None when no record
        has one."""
        self._decoded = decoded
        self._raw_actions: Sequence[int] | None = None

    @classmethod
    def from_bodies(cls, bodies: Sequence[bytes], actions: Sequence[int],
                    origins: Sequence[bytes] | None = None) -> Records:
        """Records of these PlainBuffer bodies and action types (and origin record bodies, b"" for none)."""
        types = list(actions)
        try:
            packed = bytes(types)
            raw = None
        except ValueError:  # out of a byte: kept as 0 so that the fast paths refuse it; decode() reports the type
            packed, raw = bytes(t if 0 <= t < 256 else 0 for t in types), types
        size = sum(map(len, bodies))
        origin_spans = None
        if origins is not None and any(origins):
            origin_spans = pack_spans(map(len, origins), size)
        out = cls(b"".join([*bodies, *(origins or ())]) if origin_spans is not None else b"".join(bodies),
                  pack_spans(map(len, bodies)), packed, origin_spans)
        out._raw_actions = raw
        return out

    @classmethod
    def from_messages(cls, messages: Sequence[Any]) -> Records:
        """The records of ``ots_tunnel_pb2.Record`` messages, kept encoded."""
        return cls.from_bodies([msg.record for msg in messages], [msg.action_type for msg in messages],
                               [msg.origin_record for msg in messages])

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.decode())

    def __bool__(self) -> bool:
        return bool(self.actions)

    @property
    def bodies(self) -> list[bytes]:
        """Each record's PlainBuffer body (one ``bytes`` each: for the object paths)."""
        return _slices(self.data, self.spans)

    @property
    def origins(self) -> list[bytes] | None:
        """Each record's origin record body (b"" for none), or None when no record has one."""
        return None if self.origin_spans is None else _slices(self.data, self.origin_spans)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> Records: ...

    def __getitem__(self, index: int | slice) -> Record | Records:
        if not isinstance(index, slice):
            return self.decode()[index]
        start, stop, step = index.indices(len(self))
        if step != 1:
            picked = range(start, stop, step)
            spans = b"".join(self.spans[16 * i:16 * i + 16] for i in picked)
            origins = None if self.origin_spans is None else b"".join(
                self.origin_spans[16 * i:16 * i + 16] for i in picked)
        else:
            stop = max(start, stop)
            spans = self.spans[16 * start:16 * stop]
            origins = None if self.origin_spans is None else self.origin_spans[16 * start:16 * stop]
        out = Records(self.data, spans, self.actions[index], origins,
                             None if self._decoded is None else self._decoded[index])
        out._raw_actions = None if self._raw_actions is None else self._raw_actions[index]
        return out

    @classmethod
    def concat(cls, parts: Sequence[Records]) -> Records:
        """One Records holding ``parts`` in order (their buffers joined, unless they share one)."""
        if len(parts) <= 1:
            return parts[0] if parts else cls(b"", b"", b"")
        shared = all(part.data is parts[0].data for part in parts)
        data = parts[0].data if shared else b"".join(part.data for part in parts)
        spans: list[bytes] = []
        origins: list[bytes] = []
        at = 0
        for part in parts:
            delta = 0 if shared else at
            spans.append(_shifted(part.spans, delta))
            origins.append(_shifted(part.origin_spans, delta) if part.origin_spans is not None
                           else bytes(len(part.spans)))
            at += len(part.data)
        decoded = None
        if all(part._decoded is not None for part in parts):  # decoded while scanned (no compiled decoder)
            decoded = [record for part in parts for record in part._decoded or ()]
        has_origins = any(part.origin_spans is not None for part in parts)
        out = cls(data, b"".join(spans), b"".join(part.actions for part in parts),
                  b"".join(origins) if has_origins else None, decoded)
        if any(part._raw_actions is not None for part in parts):
            out._raw_actions = [t for part in parts for t in part.action_types()]
        return out

    def action_types(self) -> Sequence[int]:
        """The records' action types as the server sent them."""
        return self._raw_actions if self._raw_actions is not None else list(self.actions)

    def decode(self) -> list[Record]:
        """The records, as :func:`decode_records` gives them (decoded once, then kept)."""
        if self._decoded is None and _decode_in is not None and self._actions_valid():
            # in C, in place: None when a record would not decode, and the loop below raises its error
            self._decoded = _decode_in(self.data, self.spans, self.actions, self.origin_spans, Record, _MEMBERS)
        if self._decoded is None:
            origins = self.origins if self.origins is not None else [b""] * len(self)
            self._decoded = _decode(zip(self.action_types(), self.bodies, origins, strict=True))
        return self._decoded

    def scan(self, until_us: int | None = None, start: int = 0) -> tuple[int, int | None]:
        """(the index of the first record from ``start`` on whose sequence timestamp is at or past ``until_us`` --
        ``len(self)`` if none or ``until_us`` is None --, the newest sequence timestamp from ``start`` on).

        Raises what :meth:`decode` raises when a record does not decode (every record is checked, as decoding
        the answer would)."""
        if _scan is not None and self._decoded is None and self._actions_valid():
            scanned = _scan(self.data, self.spans, until_us, start, False)
            if scanned is not None and (self.origin_spans is None
                                        or _scan(self.data, self.origin_spans, None, 0, True) is not None):
                return scanned
        records = self.decode()
        first, newest = len(records), None
        for i in range(start, len(records)):
            seq = records[i].sequence
            if seq is None:
                continue
            if until_us is not None and first == len(records) and seq.timestamp >= until_us:
                first = i
            if newest is None or seq.timestamp > newest:
                newest = seq.timestamp
        return first, newest

    def _actions_valid(self) -> bool:
        return self._raw_actions is None and not self.actions.strip(b"\x01\x02\x03")


def _slices(data: bytes, spans: bytes) -> list[bytes]:
    return [data[lo:hi] for lo, hi in _SPAN.iter_unpack(spans)]


def split_read_records(body: bytes) -> tuple[Records, str, bool | None] | None:
    """A ReadRecordsResponse body as (its records kept encoded in ``body`` itself, next_token, may_more_record or
    None), split in C without an object per record; None when the compiled module is not in use or the answer is
    not of the plain shape (then parse it with the protobuf runtime and use :meth:`Records.from_messages`)."""
    if _split is None:
        return None
    out = _split(body)
    if out is None:
        return None
    spans, actions, origin_spans, token, may_more = out
    return Records(body, spans, actions, origin_spans), token, may_more
