"""The emulator's own PlainBuffer codec, key encoding and signing against the reference vectors."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_tablestore.emulator import auth
from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.codec.format import HEADER, INF_MAX, INF_MIN, PlainBufferError, crc8
from airflow_tablestore.emulator.store import keys

VECTORS = [
    ("7500000001030402000000706b05060000000301000000610ad409ee", [("pk", "a")], [], False, None),
    ("7500000001030402000000706b0501000000090a3a097b", [("pk", INF_MIN)], [], False, None),
    ("7500000001030402000000706b05090000000001000000000000000a4c02030401000000630506000000030100000078070068e5cf8b"
     "0100000aeb09a8", [("pk", 1)], [("c", "x", None, 1700000000000)], False, None),
    ("7500000001030402000000706b05090000000001000000000000000a4c0809a0", [("pk", 1)], [], True, None),
    ("7500000001030402000000706b05090000000001000000000000000a4c020304010000006306010acd0978",
     [("pk", 1)], [("c", None, 1, None)], False, None),
    ("7500000001030402000000706b05090000000001000000000000000a4c02030401000000630603070068e5cf8b0100000a0e09aa",
     [("pk", 1)], [("c", None, 3, 1700000000000)], False, None),
    ("7500000001030402000000706b05090000000001000000000000000a4c02030401000000630506000000030100000078070068e5cf8b"
     "0100000aeb0b180000000c130000000d000000000e00401e18240a06000f0000000009a8",
     [("pk", 1)], [("c", "x", None, 1700000000000)], False, (0, 1700000000000000, 0)),
    ("7500000001030402000000706b05060000000301000000610ad40203040200000063310603070068e5cf8b0100000a17030402000000"
     "633206010aac0b180000000c130000000d000000000ec8411e18240a06000f0100000009c5",
     [("pk", "a")], [("c1", None, 3, 1700000000000), ("c2", None, 1, None)], False, (0, 1700000000000456, 1)),
    ("7500000001030402000000706b05060000000301000000610ad4080b180000000c130000000d000000000e15431e18240a06000f0000"
     "000009e9", [("pk", "a")], [], True, (0, 1700000000000789, 0)),
]


@pytest.mark.parametrize(("hexdata", "pk", "cells", "marker", "seq"), VECTORS)
def test_reference_vectors_encode_and_decode(hexdata: str, pk: list, cells: list, marker: bool,
                                             seq: tuple | None) -> None:
    assert encode_row(pk, cells, marker, seq).hex() == hexdata
    row = decode_row(bytes.fromhex(hexdata))
    assert row.pk == pk
    assert [tuple(c) for c in row.cells] == [tuple(c) for c in cells]
    assert row.delete_marker is marker


def test_crc8_check_value() -> None:
    assert crc8(0, b"123456789") == 0xF4


def test_corrupt_crc_header_and_truncation_are_rejected() -> None:
    good = bytearray(encode_row([("pk", 1)], [("c", "x", None, 5)]))
    bad_row_crc = bytes(good[:-1]) + bytes([good[-1] ^ 0xFF])
    with pytest.raises(PlainBufferError, match="checksum is mismatch"):
        decode_row(bad_row_crc)
    bad_value = bytearray(good)
    bad_value[-12] ^= 0x01  # inside the cell payload -> cell checksum mismatch
    with pytest.raises(PlainBufferError):
        decode_row(bytes(bad_value))
    with pytest.raises(PlainBufferError, match="mismatch header"):
        decode_row(b"\x76\x00\x00\x00" + bytes(good[4:]))
    with pytest.raises(PlainBufferError):
        decode_row(bytes(good[:-5]))
    with pytest.raises(PlainBufferError, match="UTF8"):
        decode_row(encode_row([("pk", b"\xff\xfe")], []).replace(
            b"\x07\x02\x00\x00\x00\xff\xfe", b"\x03\x02\x00\x00\x00\xff\xfe"))


values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.binary(max_size=20),
                   st.booleans(), st.floats(allow_nan=False))
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8))), min_size=1,
                max_size=4),
       st.lists(st.tuples(names, values, st.none(), st.one_of(st.none(), st.integers(0, 2**62))), max_size=6),
       st.booleans())
def test_roundtrip(pk: list, cells: list, marker: bool) -> None:
    data = encode_row(pk, cells, marker)
    row = decode_row(data)
    assert row.pk == pk
    assert [tuple(c) for c in row.cells] == [tuple(c) for c in cells]
    assert row.delete_marker is marker


pk_values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=6), st.binary(max_size=6))


def _order(v: object) -> object:
    return v.encode() if isinstance(v, str) else v


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=5)),
                min_size=2, max_size=20))
def test_key_encoding_preserves_tablestore_order(rows: list[tuple[str, int, bytes]]) -> None:
    by_value = sorted(rows, key=lambda r: (r[0].encode(), r[1], r[2]))
    by_key = sorted(rows, key=lambda r: keys.encode_key(list(r)))
    assert [(r[0].encode(), r[1], r[2]) for r in by_value] == [(r[0].encode(), r[1], r[2]) for r in by_key]
    for r in rows:
        assert keys.decode_key(keys.encode_key(list(r)), ["STRING", "INTEGER", "BINARY"]) == list(r)


def test_inf_bounds_inside_tuples() -> None:
    row = keys.encode_key(["a", 5])
    assert keys.encode_key(["a", INF_MIN]) < row < keys.encode_key(["a", INF_MAX])
    assert keys.encode_key([INF_MIN]) < keys.encode_key(["", -(2**63)])
    assert keys.encode_key(["a", INF_MAX]) < keys.encode_key(["a\x00", -(2**63)]) < keys.encode_key(["b", INF_MIN])


def test_signing_reference_vectors() -> None:
    headers = {
        "x-ots-date": "2024-01-02T03:04:05.000Z", "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": "testid", "x-ots-instancename": "inst",
        "x-ots-contentmd5": "1B2M2Y8AsgTpgAmY7PhCfg==",
    }
    assert auth.sign_v2("testsecret", "/ListTable", headers) == "l8hZr0IhTSg8xClIhHGF+y5Smzg="
    key = auth.v4_key("testsecret", "20240102", "cn-hangzhou")
    assert key == "ytaYVQf4sduCec6WEA4ZccLVPDwA1ChFD7R5xHfaYG0="
    v4_headers = dict(headers, **{"x-ots-signdate": "20240102", "x-ots-signregion": "cn-hangzhou"})
    assert auth.sign_v4(key, "/ListTable", v4_headers) == "SW0Mju4Riu1lpupOWGlehAUYfKtVe76EzRBASRrnbmo="
    resp = {"x-ots-contentmd5": "1B2M2Y8AsgTpgAmY7PhCfg==", "x-ots-contenttype": "protocol buffer",
            "x-ots-date": "2024-01-02T03:04:05.123456Z", "x-ots-requestid": "req-1"}
    assert auth.sign_response("testsecret", "/ListTable", resp) == "NttkxKDMd6PC4u2ifbCKfOgS8W0="
    assert auth.sign_response(key, "/ListTable", resp) == "CxbY3/D0EKq0vD/Mb/EZ7FQqNRc="


def test_lenient_date_parsing() -> None:
    assert auth.parse_date("2024-01-02T03:04:05.678Z") == pytest.approx(1704164645.678)
    assert auth.parse_date("2024-09-13T14:05:09.9132Z") is not None  # Go SDK quirk
    assert auth.parse_date("2024-01-02T03:04:05Z") == 1704164645
    assert auth.parse_date("yesterday") is None
    assert auth.format_date(1704164645.678) == "2024-01-02T03:04:05.678Z"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 200), st.integers(0, 255))
def test_garbage_only_raises_plainbuffer_error(suffix: bytes, cut: int, flip: int) -> None:
    good = encode_row([("pk", "k"), ("n", 7)], [("a", "x" * 20, None, 5), ("b", 1.5, None, 6)], False,
                      (0, 10, 0))
    variants = [good[:cut], HEADER + suffix, good + suffix]
    if cut < len(good):
        variants.append(good[:cut] + bytes([good[cut] ^ (flip or 1)]) + good[cut + 1:])
    for data in variants:
        with contextlib.suppress(PlainBufferError):  # any other exception fails the test
            decode_row(data)
