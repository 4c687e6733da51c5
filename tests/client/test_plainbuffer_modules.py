"""The PlainBuffer codec's module layout: the facade keeps every public name, each module imports on its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_tablestore.client import (
    plainbuffer,
    plainbuffer_decode,
    plainbuffer_encode,
    plainbuffer_format,
    plainbuffer_sqlvariant,
)

MODULES = [plainbuffer, plainbuffer_format, plainbuffer_encode, plainbuffer_decode, plainbuffer_sqlvariant]


def test_facade_exports_the_codec_api() -> None:
    assert sorted(plainbuffer.__all__) == [
        "HEADER",
        "decode_record",
        "decode_record_list",
        "decode_row",
        "decode_rows",
        "decode_sql_variant",
        "encode_primary_key",
        "encode_row",
        "encode_rows",
        "encode_sql_variant",
        "gc_paused",
    ]
    homes = [plainbuffer_format, plainbuffer_encode, plainbuffer_decode, plainbuffer_sqlvariant]
    for name in plainbuffer.__all__:
        assert any(getattr(plainbuffer, name) is getattr(home, name, None) for home in homes), name


def test_facade_keeps_the_tag_and_value_type_constants() -> None:
    constants = [name for name in vars(plainbuffer_format) if name.startswith(("TAG_", "VT_"))]
    assert len(constants) == 24
    for name in constants:
        assert getattr(plainbuffer, name) == getattr(plainbuffer_format, name)


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_module_imports_alone_in_a_fresh_interpreter(module: object) -> None:
    name = module.__name__  # type: ignore[attr-defined]
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {name}"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_decoder_docstring_names_its_independent_twin() -> None:
    for module in (plainbuffer_format, plainbuffer_decode):
        assert module.__doc__ is not None
        assert "airflow_tablestore/emulator/codec.py" in module.__doc__
