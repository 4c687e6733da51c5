"""The PlainBuffer codec's module layout: each public name has one home, each module imports on its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_tablestore.client.plainbuffer import crc8, decode, encode, implementation, sqlvariant
from airflow_tablestore.client.plainbuffer import format as pb_format

MODULES = [pb_format, encode, decode, sqlvariant, crc8, implementation]
# The decoder's public functions come from the compiled module when it is in use (implementation.py).
COMPILED_HOME = "airflow_tablestore.client.plainbuffer._speedups"

API = {
    pb_format: ["HEADER"],
    encode: ["encode_primary_key", "encode_row", "encode_rows"],
    decode: ["decode_record", "decode_record_list", "decode_row", "decode_rows", "gc_paused"],
    sqlvariant: ["decode_sql_variant", "encode_sql_variant"],
    crc8: ["CRC8_TABLE", "crc8", "zero_table"],
}


def test_each_codec_name_is_defined_in_its_module() -> None:
    for module, names in API.items():
        for name in names:
            value = getattr(module, name)
            home = getattr(value, "__module__", module.__name__)
            if module is decode and implementation.IMPLEMENTATION == "c" and home == COMPILED_HOME:
                continue
            assert home == module.__name__, name


def test_format_defines_the_tag_and_value_type_constants() -> None:
    constants = [name for name in vars(pb_format) if name.startswith(("TAG_", "VT_"))]
    assert len(constants) == 24
    for name in constants:
        assert isinstance(getattr(pb_format, name), int), name


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_module_imports_alone_in_a_fresh_interpreter(module: object) -> None:
    name = module.__name__  # type: ignore[attr-defined]
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {name}"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_decoder_docstring_names_its_independent_twin() -> None:
    for module in (pb_format, decode):
        assert module.__doc__ is not None
        assert "airflow_tablestore/emulator/codec/" in module.__doc__
