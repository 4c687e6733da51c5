"""Parse request protobufs the way the service does: garbage, missing required fields and text that is not
UTF-8 are a 400 ``OTSParameterInvalid`` naming the problem, never an exception inside a handler.

proto2 ``string`` fields holding invalid UTF-8 parse without error and come back as ``bytes`` in Python;
left alone they reach code that expects ``str`` (a 500) or get stored and break later answers. Every request
message is checked once, here.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from airflow_tablestore.emulator.errors import parameter_invalid

M = TypeVar("M", bound=Message)

_TEXT = FieldDescriptor.TYPE_STRING
_NESTED = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 6; ``label`` is deprecated there
    if flag is not None:
        return bool(flag)
    return field.label == FieldDescriptor.LABEL_REPEATED  # type: ignore[attr-defined,unused-ignore]


_Plan = tuple[tuple[tuple[str, bool], ...], tuple[tuple[str, bool], ...]]


@functools.cache
def _plan(descriptor: Descriptor) -> _Plan:
    """For a message type: its text fields, and its message fields whose type can hold text somewhere below
    (the only ones worth visiting). Computed once per type, so the check costs a few attribute reads per
    message instead of a ``ListFields`` walk over every row of a batch."""
    text = tuple((f.name, _repeated(f)) for f in descriptor.fields if f.type == _TEXT)
    nested = tuple((f.name, _repeated(f)) for f in descriptor.fields
                   if f.type in _NESTED and f.message_type is not None
                   and _holds_text(f.message_type, frozenset()))
    return text, nested


def _holds_text(descriptor: Descriptor, seen: frozenset[str]) -> bool:
    if descriptor.full_name in seen:
        return False
    seen = seen | {descriptor.full_name}
    return any(f.type == _TEXT or (f.type in _NESTED and f.message_type is not None
                                   and _holds_text(f.message_type, seen))
               for f in descriptor.fields)


def non_utf8_field(msg: Message, prefix: str = "") -> str | None:
    """The dotted name of the first text field (recursively) whose value is not valid UTF-8, else ``None``."""
    text, nested = _plan(msg.DESCRIPTOR)
    for name, repeated in text:
        value: Any = getattr(msg, name)
        if any(not isinstance(item, str) for item in value) if repeated else not isinstance(value, str):
            return prefix + name
    for name, repeated in nested:
        if repeated:
            items: Any = getattr(msg, name)
        elif msg.HasField(name):
            items = (getattr(msg, name),)
        else:
            continue
        for item in items:
            bad = non_utf8_field(item, f"{prefix}{name}.")
            if bad:
                return bad
    return None


def require_utf8(msg: M) -> M:
    """``msg`` itself, or 400 ``OTSParameterInvalid`` naming a text field that is not valid UTF-8."""
    bad = non_utf8_field(msg)
    if bad:
        raise parameter_invalid(f"Field '{bad}' is not valid UTF-8.")
    return msg


def parse_request(cls: type[M], body: bytes, garbage_message: str) -> M:
    """Parse ``body`` as ``cls``: 400 with ``garbage_message`` when it does not parse, naming missing required
    fields or a non-UTF-8 text field otherwise."""
    msg = cls()
    try:
        msg.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError):
        raise parameter_invalid(garbage_message) from None
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise parameter_invalid(f"{garbage_message}: missing required field(s) {missing}.")
    return require_utf8(msg)
