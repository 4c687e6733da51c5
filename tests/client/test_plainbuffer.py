"""PlainBuffer codec: reference vectors byte for byte, round-trip properties and every kind of corruption."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_tablestore.client.errors import PlainBufferError, TablestoreClientError
from airflow_tablestore.client.model import (
    AUTO_INCREMENT,
    INF_MAX,
    INF_MIN,
    CellOp,
    Column,
    Row,
    SequenceInfo,
)
from airflow_tablestore.client.plainbuffer.decode import (
    decode_record,
    decode_record_list,
    decode_row,
    decode_rows,
    gc_paused,
)
from airflow_tablestore.client.plainbuffer.encode import encode_primary_key, encode_row, encode_rows
from airflow_tablestore.client.plainbuffer.sqlvariant import decode_sql_variant, encode_sql_variant

TS = 1700000000000

# (name, row, hex) from tunnel-protocol.md §4.4 and table-api-proto.md §4.2 / table-api.md §3b.
VECTORS: list[tuple[str, Row, str]] = [
    (
        "tunnel base PUT_ROW",
        Row((("pk", 1),), (Column("col", "v", TS),)),
        "75000000 01 0304 02000000 706b 05 09000000 00 0100000000000000 0a4c 02 0304 03000000 636f6c"
        " 05 06000000 03 01000000 76 07 0068e5cf8b010000 0a08 09d4",
    ),
    (
        "tunnel stream PUT_ROW",
        Row((("pk", 1),), (Column("col", "v", TS),), False, SequenceInfo(0, 1700000000000123, 0)),
        "75000000 01 0304 02000000 706b 05 09000000 00 0100000000000000 0a4c 02 0304 03000000 636f6c"
        " 05 06000000 03 01000000 76 07 0068e5cf8b010000 0a08"
        " 0b18000000 0c13000000 0d00000000 0e7b401e18240a0600 0f00000000 09d4",
    ),
    (
        "tunnel UPDATE_ROW",
        Row(
            (("pk", "a"),),
            (
                Column("c1", None, TS, CellOp.DELETE_ONE_VERSION),
                Column("c2", None, None, CellOp.DELETE_ALL_VERSIONS),
            ),
            False,
            SequenceInfo(0, 1700000000000456, 1),
        ),
        "75 00 00 00 01 03 04 02 00 00 00 70 6b 05 06 00 00 00 03 01 00 00 00 61 0a d4"
        " 02 03 04 02 00 00 00 63 31 06 03 07 00 68 e5 cf 8b 01 00 00 0a 17 03 04 02 00 00 00 63 32"
        " 06 01 0a ac 0b 18 00 00 00 0c 13 00 00 00 0d 00 00 00 00 0e c8 41 1e 18 24 0a 06 00 0f 01"
        " 00 00 00 09 c5",
    ),
    (
        "tunnel DELETE_ROW",
        Row((("pk", "a"),), (), True, SequenceInfo(0, 1700000000000789, 0)),
        "75 00 00 00 01 03 04 02 00 00 00 70 6b 05 06 00 00 00 03 01 00 00 00 61 0a d4 08 0b 18 00"
        " 00 00 0c 13 00 00 00 0d 00 00 00 00 0e 15 43 1e 18 24 0a 06 00 0f 00 00 00 00 09 e9",
    ),
    ("GetRow key", Row((("pk", "a"),)), "7500000001030402000000706b05060000000301000000610ad409ee"),
    ("GetRange INF_MIN bound", Row((("pk", INF_MIN),)), "7500000001030402000000706b0501000000090a3a097b"),
    (
        "PutRow string with ts",
        Row((("pk", 1),), (Column("c", "x", TS),)),
        "7500000001030402000000706b05090000000001000000000000000a4c02030401000000630506000000030100000078"
        "070068e5cf8b0100000aeb09a8",
    ),
    (
        "PutRow integer without ts",
        Row((("pk", 1),), (Column("c", 5),)),
        "7500000001030402000000706b05090000000001000000000000000a4c020304010000006305090000000005000000000000"
        "000a8209e0",
    ),
    (
        "DeleteRow key",
        Row((("pk", 1),), (), True),
        "7500000001030402000000706b05090000000001000000000000000a4c0809a0",
    ),
    (
        "UpdateRow DELETE_ALL",
        Row((("pk", 1),), (Column("c", None, None, CellOp.DELETE_ALL_VERSIONS),)),
        "7500000001030402000000706b05090000000001000000000000000a4c020304010000006306010acd0978",
    ),
    (
        "UpdateRow DELETE_ONE_VERSION",
        Row((("pk", 1),), (Column("c", None, TS, CellOp.DELETE_ONE_VERSION),)),
        "7500000001030402000000706b05090000000001000000000000000a4c02030401000000630603070068e5cf8b0100000a0e"
        "09aa",
    ),
    (
        "stream PUT_ROW record",
        Row((("pk", 1),), (Column("c", "x", TS),), False, SequenceInfo(0, 1700000000000000, 0)),
        "7500000001030402000000706b05090000000001000000000000000a4c02030401000000630506000000030100000078"
        "070068e5cf8b0100000aeb0b180000000c130000000d000000000e00401e18240a06000f0000000009a8",
    ),
    (
        # Captured SDK put_row body (table-api.md §3b); the SDK's bytes b"raw-bytes" is a STRING, so here
        # "raw-bytes".
        "SDK put_row capture, every type",
        Row(
            (("pk", 1), ("pks", "abc")),
            (
                Column("c1", "hello"),
                Column("c2", 42),
                Column("c3", 1.5),
                Column("c4", True),
                Column("c5", b"\x00\x01"),
                Column("c6", "raw-bytes", TS),
            ),
        ),
        "7500000001030402000000706b05090000000001000000000000000a4c030403000000706b7305080000000303000000616263"
        "0a4a020304020000006331050a000000030500000068656c6c6f0ae203040200000063320509000000002a00000000000000"
        "0aac0304020000006333050900000001000000000000f83f0a6c0304020000006334050200000002010a080304020000006335"
        "0507000000070200000000010adc0304020000006336050e00000003090000007261772d6279746573070068e5cf8b010000"
        "0ae609d3",
    ),
]


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize(("name", "row", "hex_text"), VECTORS, ids=[v[0] for v in VECTORS])
def test_reference_vectors(name: str, row: Row, hex_text: str) -> None:
    data = _hex(hex_text)
    assert encode_row(row) == data
    assert decode_row(data) == row
    assert decode_rows(data) == [row]


def test_vector_types_are_exact() -> None:
    row = decode_row(_hex(VECTORS[-1][2]))
    assert row is not None
    values = [c.value for c in row.columns]
    assert [type(v) for v in values] == [str, int, float, bool, bytes, str]
    assert row.columns[5].timestamp == TS
    assert row.get("c4") is True


def test_sentinels_round_trip_by_identity() -> None:
    data = encode_primary_key((("a", INF_MIN), ("b", INF_MAX), ("c", AUTO_INCREMENT)))
    row = decode_row(data)
    assert row is not None
    assert [v for _, v in row.primary_key] == [INF_MIN, INF_MAX, AUTO_INCREMENT]
    assert row.primary_key[0][1] is INF_MIN
    assert data[-10:-4] == b"\x05\x01\x00\x00\x00\x0b"  # AUTO_INCREMENT: length 1, type 0x0b, no payload


def test_increment_cell() -> None:
    row = Row((("pk", 1),), (Column("n", 3, None, CellOp.INCREMENT),))
    data = encode_row(row)
    assert b"\x06\x04\x0a" in data  # op then checksum (no timestamp)
    assert decode_row(data) == row


def test_sql_variant_vectors() -> None:
    assert encode_sql_variant(5).hex() == "000500000000000000"
    assert encode_sql_variant("ab").hex() == "03020000006162"
    for value in (5, -1, 1.25, True, False, "ab", "", b"\x00\xff", INF_MIN, INF_MAX):
        decoded = decode_sql_variant(encode_sql_variant(value))
        assert decoded == value and type(decoded) is type(value)
    assert encode_sql_variant(bytearray(b"x")) == b"\x07\x01\x00\x00\x00x"


def test_sql_variant_errors() -> None:
    with pytest.raises(TablestoreClientError):
        encode_sql_variant(AUTO_INCREMENT)
    with pytest.raises(TablestoreClientError):
        encode_sql_variant(None)
    with pytest.raises(PlainBufferError, match="empty"):
        decode_sql_variant(b"")
    with pytest.raises(PlainBufferError, match="unknown SQLVariant type 0x0b"):
        decode_sql_variant(b"\x0b")
    with pytest.raises(PlainBufferError, match="truncated"):
        decode_sql_variant(b"\x03\x05\x00\x00\x00ab")
    with pytest.raises(PlainBufferError, match="trailing"):
        decode_sql_variant(b"\x02\x01\x00")


# ---- multi-row messages ---------------------------------------------------------------------------


def test_empty_and_bare_header() -> None:
    assert decode_rows(b"") == []
    assert decode_row(b"") is None
    assert decode_rows(b"\x75\x00\x00\x00") == []
    assert encode_rows([]) == b"\x75\x00\x00\x00"


def test_several_rows() -> None:
    rows = [Row((("pk", i),), (Column("c", f"v{i}", TS + i),)) for i in range(5)]
    data = encode_rows(rows)
    assert data.count(b"\x75\x00\x00\x00") == 1
    assert decode_rows(data) == rows
    assert decode_rows(bytearray(data)) == rows
    assert decode_rows(memoryview(data)) == rows
    with pytest.raises(PlainBufferError, match="at most one row, found 5"):
        decode_row(data)
    with pytest.raises(PlainBufferError, match="exactly one row, found 5"):
        decode_record(data)
    with pytest.raises(PlainBufferError, match="exactly one row, found 0"):
        decode_record(b"\x75\x00\x00\x00")
    with pytest.raises(PlainBufferError, match="header"):
        decode_record(b"")


def test_decode_record_list_and_gc_pause() -> None:
    import gc

    rows = [Row((("pk", i),), (Column("c", i, TS),), False, SequenceInfo(0, i, 0)) for i in range(50)]
    assert decode_record_list([encode_row(r) for r in rows]) == rows
    assert gc.isenabled()
    with pytest.raises(PlainBufferError):
        decode_record_list([encode_row(rows[0]), b"\x75\x00\x00\x00\x02"])
    assert gc.isenabled()  # restored after an error
    big = [Row((("pk", i),), (Column("c", "x" * 100, TS),)) for i in range(500)]
    assert decode_rows(encode_rows(big)) == big  # large buffer: decoded with the GC paused
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block does not re-enable what the outer one paused
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a paused collector stays as the caller left it
    finally:
        gc.enable()


def test_decode_record_with_sequence() -> None:
    row = decode_record(_hex(VECTORS[1][2]))
    assert row.sequence == SequenceInfo(0, 1700000000000123, 0)


# ---- round-trip properties ------------------------------------------------------------------------

_names = st.text(min_size=1, max_size=12)
_int64 = st.integers(-(2**63), 2**63 - 1)
_pk_values = st.one_of(
    _int64, st.text(max_size=20), st.binary(max_size=20), st.sampled_from([INF_MIN, INF_MAX, AUTO_INCREMENT])
)
_values = st.one_of(
    _int64,
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=100),
    st.binary(max_size=100),
)
_timestamps = st.one_of(st.none(), st.integers(0, 2**63 - 1))


@st.composite
def _columns(draw: st.DrawFn) -> Column:
    name = draw(_names)
    op = draw(st.sampled_from(list(CellOp)))
    if op == CellOp.PUT:
        return Column(name, draw(_values), draw(_timestamps), op)
    if op == CellOp.INCREMENT:
        return Column(name, draw(_int64), None, op)
    if op == CellOp.DELETE_ONE_VERSION:
        return Column(name, None, draw(st.integers(0, 2**63 - 1)), op)
    return Column(name, None, None, op)


@st.composite
def _rows(draw: st.DrawFn) -> Row:
    pk = tuple(draw(st.lists(st.tuples(_names, _pk_values), min_size=1, max_size=4)))
    columns = tuple(draw(st.lists(_columns(), max_size=6)))
    marker = draw(st.booleans())
    sequence = draw(
        st.one_of(
            st.none(),
            st.builds(
                SequenceInfo,
                st.integers(-(2**31), 2**31 - 1),
                st.integers(-(2**63), 2**63 - 1),
                st.integers(-(2**31), 2**31 - 1),
            ),
        )
    )
    return Row(pk, columns, marker, sequence)


@settings(max_examples=300, deadline=None)
@given(_rows())
def test_round_trip_one_row(row: Row) -> None:
    data = encode_row(row)
    assert decode_row(data) == row
    assert decode_record(data) == row
    assert encode_row(decode_record(data)) == data


@settings(max_examples=100, deadline=None)
@given(st.lists(_rows(), max_size=5))
def test_round_trip_many_rows(rows: list[Row]) -> None:
    assert decode_rows(encode_rows(rows)) == rows


@settings(max_examples=100, deadline=None)
@given(_rows(), st.data())
def test_any_single_byte_change_is_detected_or_harmless(row: Row, data: st.DataObject) -> None:
    encoded = encode_row(row)
    index = data.draw(st.integers(0, len(encoded) - 1))
    corrupted = bytearray(encoded)
    corrupted[index] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode_rows(bytes(corrupted))
    except PlainBufferError:
        return
    # Bytes not covered by a CRC: the value length prefix (ignored by readers) and the sequence extension.
    assert len(decoded) == 1
    assert decoded[0][:3] == row[:3]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_only_raises_plainbuffer_error(garbage: bytes) -> None:
    with contextlib.suppress(PlainBufferError):
        decode_rows(b"\x75\x00\x00\x00" + garbage)


# ---- corruption ---------------------------------------------------------------------------------


def _sample() -> bytes:
    return encode_row(
        Row(
            (("id", 7), ("k", "key")),
            (Column("a", "text", TS), Column("b", 2.5), Column("c", None, TS, CellOp.DELETE_ONE_VERSION)),
            False,
            SequenceInfo(1, 2, 3),
        )
    )


def test_truncated_at_every_offset() -> None:
    data = _sample()
    for cut in range(1, len(data)):
        if cut == 4:
            assert decode_rows(data[:cut]) == []
            continue
        with pytest.raises(PlainBufferError):
            decode_rows(data[:cut])
    assert "truncated" in _error(data[:-1])


def test_truncated_second_row() -> None:
    row = Row((("pk", 1),), (Column("c", "x" * 30),))
    data = encode_rows([row, row])
    one = len(encode_row(row))
    assert decode_rows(data[:one]) == [row]
    for cut in range(one + 1, len(data)):
        with pytest.raises(PlainBufferError, match="offset"):
            decode_rows(data[:cut])


def _error(data: bytes) -> str:
    with pytest.raises(PlainBufferError) as info:
        decode_rows(data)
    assert info.value.code == "OTSPlainBufferCorrupt"
    return str(info.value)


def test_bad_header() -> None:
    data = _sample()
    assert "header" in _error(b"\x74" + data[1:])
    assert "header" in _error(b"\x75\x00")


def test_bad_cell_checksum() -> None:
    data = bytearray(_hex(VECTORS[0][2]))
    index = data.index(b"\x0a\x4c") + 1
    data[index] ^= 0x01
    message = _error(bytes(data))
    assert "cell checksum mismatch" in message and "'pk'" in message and f"offset {index}" in message


def test_bad_row_checksum() -> None:
    data = bytearray(_hex(VECTORS[0][2]))
    data[-1] ^= 0x80
    assert "row checksum mismatch" in _error(bytes(data))


def test_payload_change_breaks_cell_checksum() -> None:
    data = bytearray(_hex(VECTORS[0][2]))
    data[data.index(b"\x76")] = ord("w")  # "v" -> "w" in the value of col
    assert "cell checksum mismatch for column 'col'" in _error(bytes(data))


def test_bad_tags() -> None:
    data = bytearray(_hex(VECTORS[0][2]))
    first_row = bytes(data[:4]) + b"\x02" + bytes(data[5:])
    assert "offset 4: expected ROW_PK" in _error(first_row)
    bad_name_tag = bytearray(data)
    bad_name_tag[6] = 0x05
    assert "offset 6: expected CELL_NAME" in _error(bytes(bad_name_tag))
    no_cell_crc = bytearray(data)
    no_cell_crc[27] = 0x0C  # the 0a before the pk cell CRC
    assert "offset 27: expected CELL_CHECKSUM" in _error(bytes(no_cell_crc))


def test_unknown_value_type() -> None:
    data = bytearray(_hex(VECTORS[0][2]))
    data[18] = 0x08  # pk value type byte (INTEGER -> unknown 0x08)
    assert "unknown value type 0x08 at offset 18" in _error(bytes(data))


def test_unknown_cell_op() -> None:
    data = bytearray(_hex(VECTORS[9][2]))  # UpdateRow DELETE_ALL: ... 06 01 0a cd
    data[data.index(b"\x06\x01") + 1] = 0x02
    assert "unknown cell op 0x02" in _error(bytes(data))


def test_bad_utf8() -> None:
    row = encode_row(Row((("pk", "a"),)))
    broken = row.replace(b"\x61", b"\xff")
    assert "UTF-8" in _error(broken)


# ---- encode errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        (Row((("pk", [1]),)), "column 'pk': unsupported value type list"),  # type: ignore[arg-type]
        (Row((("pk", None),)), "primary key column 'pk' has no value"),  # type: ignore[arg-type]
        (Row((("pk", 2**63),)), "column 'pk': integer 9223372036854775808 is outside the int64 range"),
        (Row((("pk", 1),), (Column("c", {"a": 1}),)), "column 'c': unsupported value type dict"),  # type: ignore[arg-type]
        (Row((("pk", 1),), (Column("c", -(2**63) - 1),)), "column 'c': integer"),
        (Row((("pk", 1),), (Column("c", INF_MAX),)), "column 'c': INF_MAX is only allowed in a primary key"),  # type: ignore[arg-type]
        (Row((("pk", 1),), (Column("c", None),)), "column 'c': a PUT cell needs a value"),
        (
            Row((("pk", 1),), (Column("c", 1, None, CellOp.DELETE_ALL_VERSIONS),)),
            "DELETE_ALL_VERSIONS cells take no value",
        ),
        (Row((("pk", 1),), (Column("c", 1, "now"),)), "column 'c': timestamp must be an int"),  # type: ignore[arg-type]
        (Row((("pk", 1),), (), False, SequenceInfo(2**31, 0, 0)), "epoch"),
        (Row((("pk", 1),), (Column("c", 1, None, 7),)), "column 'c': unknown cell op 7"),  # type: ignore[arg-type]
        (Row((("pk", 1),), (Column("c", "x", None, CellOp.INCREMENT),)), "INCREMENT needs an int, got str"),
        (
            Row((("pk", 1),), (Column("c", None, None, CellOp.INCREMENT),)),
            "column 'c': INCREMENT cells need a value",
        ),
        (Row((("pk", 1),), (("c", 1, None, 0, "extra"),)), "columns must be Column"),  # type: ignore[arg-type]
        (Row((("pk", 1, 2),)), "primary key entries must be (name, value) pairs"),  # type: ignore[arg-type]
    ],
)
def test_encode_rejects(row: Row, fragment: str) -> None:
    with pytest.raises(TablestoreClientError) as info:
        encode_row(row)
    assert fragment in str(info.value)
    assert not isinstance(info.value, PlainBufferError)


def test_encode_accepts_buffer_and_subclass_values() -> None:
    class Code(int):
        pass

    row = Row((("pk", Code(3)),), (Column("b", bytearray(b"ab")), Column("m", memoryview(b"cd")), ("t", "x")))  # type: ignore[arg-type]
    decoded = decode_row(encode_row(row))
    assert decoded is not None
    assert decoded.primary_key == (("pk", 3),)
    assert [c.value for c in decoded.columns] == [b"ab", b"cd", "x"]


def test_bool_is_boolean_not_integer() -> None:
    data = encode_row(Row((("pk", 1),), (Column("flag", True),)))
    assert b"\x05\x02\x00\x00\x00\x02\x01" in data
    decoded = decode_row(data)
    assert decoded is not None and decoded.columns[0].value is True


def _values_of(row: Row | None) -> list[Any]:
    assert row is not None
    return [c.value for c in row.columns]


def test_long_values_use_fast_crc_path() -> None:
    row = Row((("pk", "k" * 500),), (Column("s", "é" * 1000, TS), Column("b", bytes(range(256)) * 8)))
    data = encode_row(row)
    assert decode_row(data) == row
    assert _values_of(decode_row(data))[0] == "é" * 1000


# ---- cross-check with the emulator's independent codec ------------------------------------------


def _to_emulator(value: Any) -> Any:
    from airflow_tablestore.emulator.codec import format as codec_format

    specials = {id(INF_MIN): codec_format.INF_MIN, id(INF_MAX): codec_format.INF_MAX,
                id(AUTO_INCREMENT): codec_format.AUTO_INCREMENT}
    return specials.get(id(value), value)


@settings(max_examples=200, deadline=None)
@given(_rows())
def test_same_bytes_as_the_emulator_codec(row: Row) -> None:
    from airflow_tablestore.emulator.codec.decode import decode_row as emulator_decode_row
    from airflow_tablestore.emulator.codec.encode import encode_row as emulator_encode_row

    seq = row.sequence
    if seq is not None:  # the emulator writes epoch and row index unsigned: compare non-negative ones
        seq = SequenceInfo(seq.epoch & 0x7FFFFFFF, seq.timestamp, seq.row_index & 0x7FFFFFFF)
        row = row._replace(sequence=seq)
    cells = [(c.name, c.value, int(c.op) or None, c.timestamp) for c in row.columns]
    theirs = emulator_encode_row(
        [(n, _to_emulator(v)) for n, v in row.primary_key],
        cells,
        row.delete_marker,
        None if seq is None else (seq.epoch, seq.timestamp, seq.row_index),
    )
    ours = encode_row(row)
    assert ours == theirs
    decoded = emulator_decode_row(ours)
    assert [n for n, _ in decoded.pk] == [n for n, _ in row.primary_key]
    assert [(c.name, c.value, c.op or 0, c.ts) for c in decoded.cells] == [
        (c.name, c.value, int(c.op), c.timestamp) for c in row.columns
    ]
    assert decoded.delete_marker == row.delete_marker


def _with_extension(body: bytes) -> bytes:
    """The DeleteRow key vector with an arbitrary extension inserted before the row checksum."""
    data = _hex(VECTORS[8][2])  # ... 08 09 a0
    return data[:-2] + b"\x0b" + len(body).to_bytes(4, "little") + body + data[-2:]


def test_extension_unknown_blocks_are_skipped() -> None:
    seq = b"\x0c\x13\x00\x00\x00\x0d\x02\x00\x00\x00\x0e\x05\x00\x00\x00\x00\x00\x00\x00\x0f\x07\x00\x00\x00"
    unknown = b"\x10\x03\x00\x00\x00abc"
    row = decode_record(_with_extension(unknown + seq))
    assert row.sequence == SequenceInfo(2, 5, 7)
    assert row.delete_marker and row.primary_key == (("pk", 1),)
    assert decode_record(_with_extension(unknown)).sequence is None
    assert decode_record(_with_extension(b"")).sequence is None


def test_extension_errors() -> None:
    assert "overruns the extension" in _error(_with_extension(b"\x10\x09\x00\x00\x00abc"))
    assert "sequence info at offset" in _error(_with_extension(b"\x0c\x01\x00\x00\x00\x0d"))
    bad_tags = b"\x0c\x13\x00\x00\x00\x0d\x00\x00\x00\x00\x0f" + bytes(8) + b"\x0e" + bytes(4)
    assert "expected tags 0d, 0e, 0f" in _error(_with_extension(bad_tags))  # fast path
    assert "expected tags 0d, 0e, 0f" in _error(
        _with_extension(b"\x10\x00\x00\x00\x00" + bad_tags)
    )  # general
