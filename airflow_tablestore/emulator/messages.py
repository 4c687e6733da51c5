"""Parse request protobufs the way the service does: garbage, missing required fields and text that is not
UTF-8 are a 400 ``OTSParameterInvalid`` naming the problem, never an exception inside a handler.

proto2 ``string`` fields holding invalid UTF-8 parse without error and come back as ``bytes`` in Python; left
alone they reach code that expects ``str`` (a 500) or get stored and break later answers. Every request message
is checked once, here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
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


def non_utf8_field(msg: Message, prefix: str = "") -> str | None:
    """The dotted name of the first text field (recursively) whose value is not valid UTF-8, else ``None``."""
    for field, value in msg.ListFields():
        items: Any = value if _repeated(field) else (value,)
        if field.type == _TEXT:
            if any(not isinstance(item, str) for item in items):
                return prefix + field.name
        elif field.type in _NESTED:
            for item in items:
                bad = non_utf8_field(item, f"{prefix}{field.name}.")
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
