"""Turn tunnel ``Record`` protobufs into model :class:`~airflow_tablestore.client.model.Record` tuples.

This is the consumer's hot path: one PlainBuffer decode per record (CRC-checked by the codec), the action
enum looked up in a prebuilt table, and the cyclic GC paused for the batch (decoding allocates only acyclic
tuples).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import ActionType, Record
from airflow_tablestore.client.plainbuffer.decode import decode_record, gc_paused

_ACTIONS = {a.value: a for a in ActionType}


def decode_records(messages: Iterable[Any]) -> list[Record]:
    """Decode ``ots_tunnel_pb2.Record`` messages in order. Base-data records have ``sequence=None``;
    ``origin_columns`` is set only when the record carries an ``origin_record``."""
    out: list[Record] = []
    append = out.append
    actions = _ACTIONS
    with gc_paused():
        for msg in messages:
            action = actions.get(msg.action_type)
            if action is None:
                raise PlainBufferError(f"unknown tunnel record action type {msg.action_type}")
            row = decode_record(msg.record)
            origin = decode_record(msg.origin_record).columns if msg.origin_record else None
            append(Record(action, row.primary_key, row.columns, row.sequence, origin))
    return out


def decode_record_message(msg: Any) -> Record:
    """Decode one ``ots_tunnel_pb2.Record`` message."""
    return decode_records((msg,))[0]
