"""PlainBuffer: the row encoding of the table API and of tunnel records, and its CRC-8.

One module per job: ``format`` (tags, value types, layouts), ``encode`` (rows to bytes), ``decode`` (bytes to
rows), ``sqlvariant`` (single filter/boundary values), ``crc8`` (the checksum) and ``implementation`` (the
compiled decoder of ``_speedups.c`` or pure Python). Import from those modules. ``IMPLEMENTATION`` here says
which decoder is in use: ``"c"`` or ``"python"``.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "IMPLEMENTATION":
        from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION

        return IMPLEMENTATION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
