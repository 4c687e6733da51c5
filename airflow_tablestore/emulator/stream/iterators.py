"""Shard iterators of the Stream API: self-describing opaque strings naming a position in one shard.

An iterator is urlsafe base64 of ``{"s": stream_id, "p": shard_id, "a": seq, "t": ts_us}`` where ``a`` is
the last consumed log position and ``t`` a timestamp (µs) no later than any record after that position
(:mod:`.api` decides when ``t`` is too old).
"""

from __future__ import annotations

import base64
import binascii
import json

from airflow_tablestore.emulator.errors import parameter_invalid

MAX_ITERATOR_CHARS = 1024


def encode_iterator(stream_id: str, shard_id: str, after_seq: int, stamp_us: int) -> str:
    """The opaque iterator string for a position (see the module docstring)."""
    raw = json.dumps({"s": stream_id, "p": shard_id, "a": after_seq, "t": stamp_us}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def decode_iterator(text: str) -> tuple[str, str, int, int]:
    """``(stream_id, shard_id, after_seq, stamp_us)`` of an iterator; 400 OTSParameterInvalid when
    malformed."""
    if len(text) > MAX_ITERATOR_CHARS:  # ours are ~120 characters; never parse an unbounded document
        raise parameter_invalid("Invalid shard iterator.")
    try:
        data = json.loads(base64.urlsafe_b64decode(text.encode("ascii")))
        if not isinstance(data, dict):
            raise TypeError("not an object")
        return str(data["s"]), str(data["p"]), int(data["a"]), int(data["t"])
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeError, RecursionError):
        raise parameter_invalid("Invalid shard iterator.") from None
