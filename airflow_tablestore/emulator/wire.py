"""Protobuf fields assembled by hand for the hot answers: a field's tag from the generated descriptor, varints.

The generated modules stay the one wire definition (field numbers and types come from their descriptors); the
answers that carry thousands of records or rows splice stored bytes into a serialized envelope instead of
copying them through a message object (tunnel ReadRecords, GetRange from the read cache).
"""

from __future__ import annotations

from typing import Any


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_tag(message: Any, field: str) -> bytes:
    """The wire tag of ``message``'s ``field`` (a message class of a generated module)."""
    desc = message.DESCRIPTOR.fields_by_name[field]
    wire_type = 0 if desc.type in (desc.TYPE_ENUM, desc.TYPE_BOOL, desc.TYPE_INT64, desc.TYPE_INT32) else 2
    return varint(desc.number << 3 | wire_type)


def length_delimited(tag: bytes, *parts: bytes | memoryview) -> list[bytes | memoryview]:
    """The parts of a length-delimited field holding ``parts`` back to back (join them, or write them out)."""
    return [tag, varint(sum(map(len, parts))), *parts]
