"""What the emulator's protobuf API surfaces share: the handler convention, parsing, names, limits, capacity.

The convention: a surface (:class:`ApiSurface`) is a class whose handlers are methods named after their
action (``create_table``, ``get_stream_record``, ``read_records``) and whose :meth:`~ApiSurface.routes` is
its one route table, wire path → handler; the server merges the tables (a path two surfaces claim stops it
at start-up). The handlers of the protobuf surfaces (table, stream, tunnel) take the request body, parse it
with :func:`parse` and return the response message (:data:`Handler`), or its bytes when they assemble it.

The control surface (:mod:`airflow_tablestore.emulator.control`) follows the same convention, route table and
handlers named after their op, with JSON bodies instead: its handlers take the request's JSON object and
return the answer's (``ControlHandler``), and it checks its own signature (HMAC of the op, the date and the
body with the AccessKey secret) instead of the protobuf surfaces' request signing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Protocol

from google.protobuf.message import Message

from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid, table_not_found
from airflow_tablestore.emulator.messages import parse_request
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.model import TableInfo

Handler = Callable[[bytes], Message | bytes]
"""One action of a protobuf surface: the raw request body → the response message (or EmulatorError), or its
serialized bytes where the handler assembles the answer itself (the tunnel's record reads)."""


class ApiSurface(Protocol):
    """An API surface: its handlers by wire path."""

    def routes(self) -> dict[str, Handler]: ...


NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
PK_TYPES = {1: "INTEGER", 2: "STRING", 3: "BINARY"}
PK_TYPE_IDS = {v: k for k, v in PK_TYPES.items()}
BAD_PK_TYPES = {5: "BOOLEAN"}
COL_TYPES = {1: "INTEGER", 2: "DOUBLE", 3: "BOOLEAN", 4: "STRING", 7: "BINARY"}
COL_TYPE_IDS = {v: k for k, v in COL_TYPES.items()}
MAX_TABLES = 64
MAX_PK_LEN = 1024
MAX_VALUE_LEN = 2 * 1024 * 1024
MAX_ROW_WRITE = 4 * 1024 * 1024
MAX_COLUMNS_PER_WRITE = 1024
MAX_COLUMNS_TO_GET = 128
MAX_BATCH_GET = 100
MAX_BATCH_WRITE = 200
MAX_RANGE_BYTES = 4 * 1024 * 1024
MAX_CU = 100000
INT64_MAX = (1 << 63) - 1


def check_name(name: str, kind: str = "column") -> None:
    if not NAME_RE.match(name) or len(name.encode()) > 255:
        raise parameter_invalid(f"Invalid {kind} name: '{name}'.")


def type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "INTEGER"
    if isinstance(v, float):
        return "DOUBLE"
    if isinstance(v, str):
        return "STRING"
    if isinstance(v, bytes):
        return "BINARY"
    return str(v)


def invalid_pk(message: str) -> EmulatorError:
    return EmulatorError("OTSInvalidPK", message, 400)


def parse(cls: type[Message], body: bytes) -> Any:
    """Parse a request message; 400 on garbage, missing required fields or non-UTF-8 text."""
    return parse_request(cls, body, "Parse PBMessage from RawString failed.")


def set_consumed(consumed: Any, read: int = 0, write: int = 0) -> None:
    consumed.capacity_unit.read = read
    consumed.capacity_unit.write = write


def cu(size: int) -> int:
    return max(1, math.ceil(size / 4096))


def table_or_error(store: Store, name: str) -> TableInfo:
    """The table's info; 400 for an invalid name, 404 ``OTSObjectNotExist`` for a missing table."""
    info = store.tables.get(name)
    if info is None:
        if not NAME_RE.match(name):
            raise parameter_invalid(f"Invalid table name: '{name}'.")
        raise table_not_found()
    return info
