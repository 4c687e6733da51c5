"""Tunnel read tokens: ``base64(Token{version=2, TokenContentV2{...}})`` positions inside a channel.

A token is a *position*, never a cursor with side effects: reading the same token twice returns the same
records. Layout chosen by the emulator (clients treat tokens as opaque except for the SDK heuristic
"non-empty ``iterator`` ⇒ stream channel"):

* base channel: ``primary_key`` = order-preserving key of the last row returned (empty = range start),
  ``iterator`` = ``""``, ``timestamp`` = 0.
* stream channel: ``iterator`` = ``"s:<after_seq>:<min_ts_us>"`` (records with a log position above
  ``after_seq`` and a timestamp at least ``min_ts_us`` are still to come), ``timestamp`` = consume point in ns
  (the time up to which this token has consumed the stream).
* both: ``total_count`` = rows delivered before this position (DescribeTunnel ``channel_count``).

Every token is bound to the tunnel and channel that issued it (:func:`binding`: 8 bytes of a hash of both ids,
in front of ``primary_key`` for base tokens and as a fourth iterator field for stream tokens). A token shown
to another tunnel or channel is refused as invalid (400 ``OTSParameterInvalid``), so a confused consumer can
neither read "finished" from the wrong channel nor overwrite another channel's checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

FINISHED = "finished"
TOKEN_VERSION = 2
_STREAM_PREFIX = "s"


@dataclass(frozen=True, slots=True)
class BasePosition:
    """Position in a BaseData channel: rows with key > ``after_key`` remain (``b""`` = from range start)."""

    after_key: bytes
    count: int


@dataclass(frozen=True, slots=True)
class StreamPosition:
    """Position in a stream channel: entries with seq > ``after_seq`` and ts >= ``min_ts_us`` remain."""

    after_seq: int
    min_ts_us: int
    consumed_ns: int
    count: int


Position = BasePosition | StreamPosition
BINDING_BYTES = 8


def binding(tunnel_id: str, channel_id: str) -> bytes:
    """The 8-byte tag that ties a token to its tunnel and channel."""
    return hashlib.sha256(f"{tunnel_id}/{channel_id}".encode()).digest()[:BINDING_BYTES]


def encode_base(pos: BasePosition, bound_to: bytes) -> str:
    """Serialise a base-channel position of the channel ``bound_to`` names."""
    content = tunnel_pb2.TokenContentV2(primary_key=bound_to + pos.after_key, iterator="", timestamp=0,
                                        total_count=pos.count)
    return _wrap(content)


def encode_stream(pos: StreamPosition, bound_to: bytes) -> str:
    """Serialise a stream-channel position (non-empty iterator, consume point in ``timestamp``)."""
    content = tunnel_pb2.TokenContentV2(
        iterator=f"{_STREAM_PREFIX}:{pos.after_seq}:{pos.min_ts_us}:{bound_to.hex()}",
        timestamp=pos.consumed_ns,
        total_count=pos.count,
    )
    return _wrap(content)


def encode(pos: Position, bound_to: bytes) -> str:
    """Serialise either kind of position."""
    return encode_base(pos, bound_to) if isinstance(pos, BasePosition) else encode_stream(pos, bound_to)


def _wrap(content: tunnel_pb2.TokenContentV2) -> str:
    token = tunnel_pb2.Token(version=TOKEN_VERSION, content=content.SerializeToString())
    return base64.b64encode(token.SerializeToString()).decode("ascii")


def decode(token: str, bound_to: bytes) -> Position:
    """Parse a token :func:`encode` produced for the channel ``bound_to`` names; anything else (another
    channel's token, ``"finished"``, garbage) is 400 ``OTSParameterInvalid``."""
    if token == FINISHED:
        raise parameter_invalid("the channel is finished: token 'finished' cannot be read")
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
        outer = tunnel_pb2.Token()
        outer.ParseFromString(raw)
        if not outer.IsInitialized() or outer.version != TOKEN_VERSION:
            raise ValueError("unsupported token version")
        content = tunnel_pb2.TokenContentV2()
        content.ParseFromString(outer.content)
        if not isinstance(content.iterator, str):  # proto2 gives bytes for text that is not UTF-8
            raise ValueError("iterator is not valid UTF-8")
    except (ValueError, UnicodeEncodeError, binascii.Error, DecodeError) as exc:
        raise parameter_invalid(f"invalid token: {exc}") from None
    count = content.total_count
    if not content.iterator:
        if content.primary_key[:BINDING_BYTES] != bound_to:
            raise parameter_invalid("invalid token: it belongs to another tunnel or channel")
        return BasePosition(after_key=content.primary_key[BINDING_BYTES:], count=count)
    parts = content.iterator.split(":")
    if len(parts) != 4 or parts[0] != _STREAM_PREFIX:
        raise parameter_invalid("invalid token: unknown iterator format")
    if parts[3] != bound_to.hex():
        raise parameter_invalid("invalid token: it belongs to another tunnel or channel")
    try:
        after_seq, min_ts = int(parts[1]), int(parts[2])
    except ValueError:
        raise parameter_invalid("invalid token: bad iterator numbers") from None
    return StreamPosition(after_seq=after_seq, min_ts_us=min_ts, consumed_ns=content.timestamp, count=count)
