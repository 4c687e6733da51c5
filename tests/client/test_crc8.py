"""CRC-8 (poly 0x07, init 0): reference values and agreement of the fast paths with a bitwise definition."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from airflow_tablestore.client.plainbuffer.crc8 import CRC8_TABLE, crc8, crc8_byte, zero_table


def _bitwise(data: bytes, crc: int = 0) -> int:
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def test_check_value() -> None:
    assert crc8(b"123456789") == 0xF4


def test_table_head() -> None:
    assert list(CRC8_TABLE[:8]) == [0x00, 0x07, 0x0E, 0x09, 0x1C, 0x1B, 0x12, 0x15]
    assert len(CRC8_TABLE) == 256


def test_empty_keeps_state() -> None:
    assert crc8(b"") == 0
    assert crc8(b"", 0x5A) == 0x5A


def test_byte_step() -> None:
    assert crc8_byte(0, 0x31) == crc8(b"1")
    assert crc8_byte(0x4C, 0x01) == _bitwise(b"\x01", 0x4C)


@given(st.binary(max_size=700), st.integers(0, 255))
def test_matches_bitwise_definition(data: bytes, start: int) -> None:
    # Covers the short byte loop and the 4-byte block fold (from 80 bytes), at every length modulo 4.
    assert crc8(data, start) == _bitwise(data, start)


def test_long_inputs() -> None:
    for size in (79, 80, 81, 255, 256, 319, 320, 2047, 2048, 2049, 4096, 4097, 100_003):
        data = os.urandom(size)
        assert crc8(data) == _bitwise(data), size
        assert crc8(data, 0x3C) == _bitwise(data, 0x3C), size
    assert crc8(bytes(5000)) == 0


@given(st.binary(max_size=64), st.integers(0, 255))
def test_zero_table_linearity(data: bytes, start: int) -> None:
    assert crc8(data, start) == zero_table(len(data))[start] ^ crc8(data)
    assert zero_table(len(data))[start] == _bitwise(bytes(len(data)), start)


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_incremental(a: bytes, b: bytes) -> None:
    assert crc8(b, crc8(a)) == crc8(a + b)


def test_accepts_buffers() -> None:
    data = bytes(range(200))
    assert crc8(bytearray(data)) == crc8(memoryview(data)) == crc8(data) == _bitwise(data)
    assert crc8(memoryview(data)[3:10]) == _bitwise(data[3:10])
