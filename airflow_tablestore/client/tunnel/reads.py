"""What a ReadRecords answer means: the end-of-channel token, the SDKs' "enough data" rule, stream tokens."""

from __future__ import annotations

import base64
from typing import Any, NamedTuple

from airflow_tablestore.client.records import Records
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

FINISHED = "finished"
"""The token that marks a fully consumed channel (``next_token``, checkpoint and GetCheckpoint answer)."""

class ReadResult(NamedTuple):
    """One ReadRecords answer: its records (:class:`~airflow_tablestore.client.records.Records`, decoded on first use
    or turned straight into Arrow). ``may_more`` is the server's ``may_more_record`` hint (None when it sent none);
    ``size_bytes`` is the serialized response size (both feed the SDKs' "enough data" rule)."""

    records: Records
    next_token: str
    may_more: bool | None
    size_bytes: int


ENOUGH_RECORDS = 500
ENOUGH_BYTES = 900 * 1024


def enough_data(result: ReadResult) -> bool:
    """The SDKs' rule: ``may_more_record`` when the server sends it, else > 500 records or > 900 KiB.

    A stream channel whose read was not "enough" has caught up with the log: wait before reading again."""
    if result.may_more is not None:
        return result.may_more
    return len(result.records) > ENOUGH_RECORDS or result.size_bytes > ENOUGH_BYTES


def is_stream_token(token: str) -> bool:
    """The SDK heuristic: a token whose ``Token`` content has a non-empty iterator belongs to a stream
    channel.

    Unparsable tokens (and ``"finished"``) count as base-data tokens.
    """
    if not token or token == FINISHED:
        return False
    try:
        wrapper = tunnel_pb2.Token.FromString(base64.b64decode(token, validate=False))
        content_cls = tunnel_pb2.TokenContent if wrapper.version == 1 else tunnel_pb2.TokenContentV2
        return bool(content_cls.FromString(wrapper.content).iterator)
    except Exception:  # noqa: BLE001 - binascii.Error, DecodeError (varies by protobuf runtime), ...
        return False


