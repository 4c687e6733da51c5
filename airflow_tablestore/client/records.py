"""Tunnel ``Record`` protobufs -> model :class:`~airflow_tablestore.client.model.Record` tuples, or kept encoded.

This is the consumer's hot path: one PlainBuffer decode per record (CRC-checked by the codec), the action
enum looked up in a prebuilt table, and the cyclic GC paused for the batch (decoding allocates only acyclic
tuples). :class:`EncodedRecords` keeps an answer's records as their PlainBuffer bodies instead, for readers
that turn them straight into Arrow (``spark/changes.py``); it decodes to the same records on demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


_scan = getattr(compiled_module(), "scan_records", None)


class EncodedRecords:
    """One ReadRecords answer's records, not decoded: each record's PlainBuffer body and action type.

    What stays per record is the protobuf layer's ``bytes`` of the body (and of an origin record, where there is
    one); the action types are one ``bytes`` object for the answer. :meth:`decode` gives exactly what
    :func:`decode_records` gives (errors included); :meth:`scan` reads the sequence timestamps without decoding
    (in C where the compiled decoder is in use), having checked that every record decodes.
    """

    __slots__ = ("bodies", "actions", "origins", "_decoded", "_raw_actions")

    def __init__(self, bodies: Sequence[bytes], actions: bytes, origins: Sequence[bytes] | None = None,
                 decoded: list[Record] | None = None) -> None:
        if len(actions) != len(bodies) or (origins is not None and len(origins) != len(bodies)):
            raise ValueError("EncodedRecords: bodies, actions and origins must have one entry per record")
        self.bodies = bodies
        self.actions = actions
        """One byte per record: its action type (0 stands for a type outside 0..255, which decode() reports)."""
        self.origins = origins
        """Each record's origin record body (b"" for none), or None when no record has one."""
        self._decoded = decoded
        self._raw_actions: Sequence[int] | None = None

    @classmethod
    def from_messages(cls, messages: Sequence[Any]) -> EncodedRecords:
        """The records of ``ots_tunnel_pb2.Record`` messages, kept encoded."""
        bodies = [msg.record for msg in messages]
        types = [msg.action_type for msg in messages]
        raw: list[int] | None = None
        try:
            actions = bytes(types)
        except ValueError:  # out of a byte: kept as 0 so that the fast paths refuse it; decode() reports the type
            actions, raw = bytes(t if 0 <= t < 256 else 0 for t in types), types
        origins = [msg.origin_record for msg in messages] if any(msg.origin_record for msg in messages) else None
        out = cls(bodies, actions, origins)
        out._raw_actions = raw
        return out

    def __len__(self) -> int:
        return len(self.bodies)

    def __bool__(self) -> bool:
        return bool(self.bodies)

    @overload
    def __getitem__(self, index: slice) -> EncodedRecords: ...

    @overload
    def __getitem__(self, index: int) -> Record: ...

    def __getitem__(self, index: slice | int) -> EncodedRecords | Record:
        if not isinstance(index, slice):
            return self.decode()[index]
        out = EncodedRecords(self.bodies[index], self.actions[index],
                             None if self.origins is None else self.origins[index],
                             None if self._decoded is None else self._decoded[index])
        out._raw_actions = None if self._raw_actions is None else self._raw_actions[index]
        return out

    @classmethod
    def concat(cls, parts: Sequence[EncodedRecords]) -> EncodedRecords:
        """One EncodedRecords holding ``parts`` in order."""
        if len(parts) == 1:
            return parts[0]
        bodies = [body for part in parts for body in part.bodies]
        origins = None
        if any(part.origins is not None for part in parts):
            origins = [o for part in parts for o in (part.origins or [b""] * len(part))]
        decoded = None
        if all(part._decoded is not None for part in parts):  # decoded while scanned (no compiled decoder)
            decoded = [record for part in parts for record in part._decoded or ()]
        out = cls(bodies, b"".join(part.actions for part in parts), origins, decoded)
        if any(part._raw_actions is not None for part in parts):
            out._raw_actions = [t for part in parts for t in part.action_types()]
        return out

    def action_types(self) -> Sequence[int]:
        """The records' action types as the server sent them."""
        return self._raw_actions if self._raw_actions is not None else list(self.actions)

    def decode(self) -> list[Record]:
        """The records, as :func:`decode_records` gives them (decoded once, then kept)."""
        if self._decoded is None:
            origins = self.origins if self.origins is not None else [b""] * len(self.bodies)
            self._decoded = _decode(zip(self.action_types(), self.bodies, origins, strict=True))
        return self._decoded

    def scan(self, until_us: int | None = None, start: int = 0) -> tuple[int, int | None]:
        """(the index of the first record from ``start`` on whose sequence timestamp is at or past ``until_us`` --
        ``len(self)`` if none or ``until_us`` is None --, the newest sequence timestamp from ``start`` on).

        Raises what :meth:`decode` raises when a record does not decode (every record is checked, as decoding
        the answer would)."""
        if _scan is not None and self._decoded is None and self._actions_valid():
            scanned = _scan(self.bodies, until_us, start)
            if scanned is not None and (self.origins is None or _scan([o for o in self.origins if o], None, 0)):
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
