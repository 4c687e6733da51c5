"""Turn tunnel ``Record`` protobufs into model :class:`~airflow_tablestore.client.model.Record` tuples.

This is the consumer's hot path: one PlainBuffer decode per record, no per-record validation beyond what the
codec does (CRC checks), and the action enum looked up in a prebuilt table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import ActionType, Column, Record
from airflow_tablestore.client.plainbuffer import decode_record

_ACTIONS = {a.value: a for a in ActionType}


def _decode_origin(data: bytes) -> tuple[Column, ...]:
    return decode_record(data).columns


def decode_records(messages: Iterable[Any]) -> list[Record]:
    """Decode ``ots_tunnel_pb2.Record`` messages in order. Base-data records have ``sequence=None``."""
    out: list[Record] = []
    append = out.append
    actions = _ACTIONS
    for msg in messages:
        try:
            action = actions[msg.action_type]
        except KeyError:
            raise PlainBufferError(f"unknown tunnel record action type {msg.action_type}") from None
        row = decode_record(msg.record)
        origin = _decode_origin(msg.origin_record) if msg.origin_record else None
        append(Record(action, row.primary_key, row.columns, row.sequence, origin))
    return out


def decode_record_message(msg: Any) -> Record:
    """Decode one ``ots_tunnel_pb2.Record`` message."""
    return decode_records((msg,))[0]
