"""The compiled PlainBuffer decoder against the pure-Python one: same rows, same errors, byte for byte.

Both decoders get the same seeded-random buffers from the client's encoder (every value type, the primary-key
sentinels, cell deletes of one and of all versions, increments, many versions, row deletes, sequence info,
empty and 2 MB values), hand-made buffers the encoder never writes (NULL values, unknown sub-blocks of the
extension, invalid UTF-8 with valid CRCs), every truncation of some buffers and random byte corruptions.
Results must be equal down to the Python types; failures must raise the same class with the same message.

The compiled module must be present: a build that silently fell back to pure Python fails here, unless
``TABLESTORE_PLAINBUFFER_OPTIONAL=1`` says the compiled decoder is optional in this environment. The
``oracle`` test decodes the same buffers with the official SDK (in its own venv) and compares the values.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import random
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_tablestore.client.model import AUTO_INCREMENT, INF_MAX, INF_MIN, CellOp, Column, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer import crc8 as crc8_module
from airflow_tablestore.client.plainbuffer import decode, implementation
from airflow_tablestore.client.plainbuffer.crc8 import crc8
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows

SEED = 20240622
TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def compiled() -> ModuleType:
    try:
        module = importlib.import_module("airflow_tablestore.client.plainbuffer._speedups")
    except ImportError as exc:
        if os.environ.get("TABLESTORE_PLAINBUFFER_OPTIONAL") == "1":
            pytest.skip(f"the compiled decoder is not built (optional here): {exc}")
        raise AssertionError(
            "the compiled PlainBuffer decoder is not built; `pip install -e .` with a C compiler builds it "
            "(set TABLESTORE_PLAINBUFFER_OPTIONAL=1 where it is optional)"
        ) from exc
    decode.set_up_compiled(module)
    return module


# ---- comparing outcomes ----------------------------------------------------------------------------------


def canon(value: Any) -> Any:
    """A comparable form that keeps types apart (True vs 1, NaN by its bits, tuple subclasses by name)."""
    if isinstance(value, tuple):
        return (type(value).__name__, tuple(canon(item) for item in value))
    if isinstance(value, list):
        return ("list", [canon(item) for item in value])
    if isinstance(value, float):
        return ("float", struct.pack("<d", value).hex())
    if isinstance(value, CellOp):
        return ("CellOp", value.name)
    if value is INF_MIN or value is INF_MAX or value is AUTO_INCREMENT:
        return ("sentinel", repr(value))
    return (type(value).__name__, value)


def outcome(fn: Callable[[Any], Any], data: Any) -> Any:
    try:
        return ("ok", canon(fn(data)))
    except Exception as exc:  # noqa: BLE001 - the class and message are what is compared
        return ("error", type(exc).__name__, str(exc))


def assert_same(compiled: ModuleType, data: Any) -> Any:
    """Both decoders agree on ``data`` through all three entry points; returns the decode_rows outcome."""
    pairs = (
        (compiled.decode_rows, decode.decode_rows_python),
        (compiled.decode_record, decode.decode_record_python),
        (lambda d: compiled.decode_record_list([d, d]), lambda d: decode.decode_record_list_python([d, d])),
    )
    first = None
    for fast, slow in pairs:
        expected = outcome(slow, data)
        got = outcome(fast, data)
        assert got == expected, f"input {bytes(data)[:200].hex()}..."
        first = first or expected
    return first


# ---- random rows -------------------------------------------------------------------------------------------

_TEXT = "abcxyz é中文🙂\u0000 "


def _text(rnd: random.Random, limit: int = 24) -> str:
    return "".join(rnd.choice(_TEXT) for _ in range(rnd.randrange(limit)))


def _int(rnd: random.Random) -> int:
    return rnd.choice([0, 1, -1, 2**63 - 1, -(2**63), 2**31, rnd.randrange(-(2**63), 2**63)])


def _float(rnd: random.Random) -> float:
    return rnd.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-308, rnd.uniform(-1e9, 1e9)])


def _value(rnd: random.Random) -> Any:
    kind = rnd.randrange(5)
    if kind == 0:
        return _int(rnd)
    if kind == 1:
        return _float(rnd)
    if kind == 2:
        return rnd.random() < 0.5
    if kind == 3:
        return _text(rnd)
    return rnd.randbytes(rnd.randrange(20))


def _pk_value(rnd: random.Random) -> Any:
    kind = rnd.randrange(6)
    if kind == 0:
        return _int(rnd)
    if kind == 1:
        return _text(rnd)
    if kind == 2:
        return rnd.randbytes(rnd.randrange(12))
    return (INF_MIN, INF_MAX, AUTO_INCREMENT)[kind - 3]


def random_row(rnd: random.Random) -> Row:
    pk = tuple((f"pk{i}", _pk_value(rnd)) for i in range(rnd.randrange(1, 4)))
    columns: list[Column] = []
    for _ in range(rnd.randrange(0, 10)):
        name = rnd.choice(["a", "b", "name", "é", "long_column_name_" * 3, ""])
        op = rnd.choice([CellOp.PUT] * 4 + [CellOp.DELETE_ONE_VERSION, CellOp.DELETE_ALL_VERSIONS, CellOp.INCREMENT])
        ts = rnd.choice([None, TS, TS + rnd.randrange(1000), -1])
        if op is CellOp.PUT:
            for version in range(rnd.choice([1, 1, 1, 5])):  # many versions of one column
                columns.append(Column(name, _value(rnd), None if ts is None else ts - version, op))
        elif op is CellOp.DELETE_ONE_VERSION:
            columns.append(Column(name, None, ts if ts is not None else TS, op))
        elif op is CellOp.DELETE_ALL_VERSIONS:
            columns.append(Column(name, None, ts, op))
        else:
            columns.append(Column(name, _int(rnd), ts, op))
    sequence = None
    if rnd.random() < 0.5:
        sequence = SequenceInfo(
            rnd.choice([0, 1, -(2**31), 2**31 - 1]), rnd.randrange(-(2**63), 2**63), rnd.randrange(-(2**31), 2**31)
        )
    return Row(pk, tuple(columns), rnd.random() < 0.2, sequence)


def random_buffers(rnd: random.Random, count: int) -> list[bytes]:
    buffers = []
    for _ in range(count):
        rows = [random_row(rnd) for _ in range(rnd.randrange(0, 4))]
        buffers.append(encode_row(rows[0]) if len(rows) == 1 else encode_rows(rows))
    return buffers


# ---- hand-made buffers (what the encoder never writes) --------------------------------------------------------


def cell(name: bytes, value: bytes | None = None, ts: int | None = None, op: int | None = None) -> tuple[bytes, int]:
    """One cell with a correct CRC; ``value`` is the type byte plus payload. Returns (bytes, cell CRC)."""
    out = b"\x03\x04" + struct.pack("<I", len(name)) + name
    crc = crc8(name)
    if value is not None:
        out += b"\x05" + struct.pack("<I", len(value)) + value
        crc = crc8(value, crc)
    if op is not None:
        out += bytes((0x06, op))
    if ts is not None:
        out += b"\x07" + struct.pack("<q", ts)
        crc = crc8(struct.pack("<q", ts), crc)
    if op is not None:
        crc = crc8(bytes((op,)), crc)
    return out + bytes((0x0A, crc)), crc


def row(pk: list[tuple[bytes, int]], cells: list[tuple[bytes, int]], extension: bytes = b"", delete: bool = False,
        row_crc: int | None = None) -> bytes:
    crc = 0
    out = b"\x01"
    for body, cell_crc in pk:
        out += body
        crc = crc8(bytes((cell_crc,)), crc)
    if cells:
        out += b"\x02"
        for body, cell_crc in cells:
            out += body
            crc = crc8(bytes((cell_crc,)), crc)
    if delete:
        out += b"\x08"
    crc = crc8(b"\x01" if delete else b"\x00", crc)
    return out + extension + bytes((0x09, crc if row_crc is None else row_crc))


def seq_block(epoch: int = 1, ts: int = 2, index: int = 3, tags: bytes = b"\x0d\x0e\x0f", length: int = 19) -> bytes:
    return b"\x0c" + struct.pack("<I", length) + struct.pack(
        "<BiBqBi", tags[0], epoch, tags[1], ts, tags[2], index
    )[: max(0, length)] + b"\x00" * max(0, length - 19)


def extension(*blocks: bytes, length: int | None = None) -> bytes:
    body = b"".join(blocks)
    return b"\x0b" + struct.pack("<I", len(body) if length is None else length) + body


H = b"\x75\x00\x00\x00"
PK = cell(b"pk", b"\x00" + struct.pack("<q", 7))


def handmade() -> list[bytes]:
    text = b"\x03" + struct.pack("<I", 2) + b"hi"
    return [
        b"",
        H,
        b"\x75",
        b"\x75\x00\x00\x01",
        b"xyz\x00\x01",
        H + row([PK], [cell(b"n", b"\x06", TS)]),  # NULL value
        H + row([PK], [cell(b"a", text, TS), cell(b"n", b"\x06", TS)]),  # NULL after a value
        H + row([cell(b"pk", b"\x06")], []),
        H + row([PK], [cell(b"\xff\xfe", text, TS)]),  # invalid UTF-8 name
        H + row([PK], [cell(b"s", b"\x03" + struct.pack("<I", 2) + b"\xc3\x28", TS)]),  # invalid UTF-8 value
        H + row([PK], [cell(b"s", b"\x03" + struct.pack("<I", 1) + b"\xe4", TS)]),  # cut multi-byte char
        H + row([PK], [cell(b"x", b"\x04\x00", TS)]),  # unknown value type
        H + row([PK], [cell(b"x", None, TS, op=0)]),  # op byte 0 is not an op
        H + row([PK], [cell(b"x", None, TS, op=2)]),
        H + row([PK], [cell(b"x", text, None, op=4)]),
        H + row([PK], [cell(b"x", b"\x02\x07", TS)]),  # bool byte 7 -> True
        H + row([PK], [cell(b"x", text, TS)], extension(seq_block())),  # fast path
        H + row([PK], [], extension(b"\x10\x03\x00\x00\x00abc", seq_block(5, 6, 7))),  # unknown block first
        H + row([PK], [], extension(seq_block(5, 6, 7), b"\x10\x00\x00\x00\x00")),  # seq, then unknown
        H + row([PK], [], extension(b"\x10\x01\x00\x00\x00z")),  # no sequence info at all
        H + row([PK], [], extension()),  # empty extension
        H + row([PK], [], extension(seq_block(1, 2, 3), seq_block(4, 5, 6))),  # the last one wins
        H + row([PK], [], extension(seq_block(tags=b"\x0d\x0e\x10"))),  # fast path, bad tag
        H + row([PK], [], extension(b"\x10\x00\x00\x00\x00", seq_block(tags=b"\x0d\x0f\x0f"))),  # slow, bad tag
        H + row([PK], [], extension(seq_block(length=20))),  # wrong sequence length
        H + row([PK], [], extension(seq_block(length=18))),
        H + row([PK], [], extension(b"\x10\x09\x00\x00\x00ab")),  # block overruns the extension
        H + row([PK], [], extension(seq_block(), length=200)),  # extension overruns the buffer
        H + row([PK], [], extension(b"\x10\x00\x00", length=3)),  # block header cut by the extension's end
        H + row([PK], [], extension(b"\x10\x00\x00", length=3)) + b"\x00" * 8,
        H + row([PK], [cell(b"a", text, TS)], row_crc=0x55),  # row CRC mismatch
        H + row([PK], [], delete=True),
        H + row([], []),  # a row without primary key
        H + row([PK], []) + row([PK], [cell(b"a", text, TS)]),  # two rows: a record must hold one
        H + b"\x01\x02\x09\x00",
        H + b"\x01\x02\x02\x09\x00",
        H + b"\x02",
    ]


# ---- the tests ---------------------------------------------------------------------------------------------------


def test_the_attribute_says_which_decoder_runs() -> None:
    assert implementation.IMPLEMENTATION in ("c", "python")
    forced = os.environ.get(implementation.ENV_VAR, "").lower()
    if implementation.IMPLEMENTATION == "c":
        assert decode.decode_rows.__module__ == "airflow_tablestore.client.plainbuffer._speedups"
    else:
        assert decode.decode_rows is decode.decode_rows_python
        assert forced == "python" or os.environ.get("TABLESTORE_PLAINBUFFER_OPTIONAL") == "1"


def test_forcing_pure_python_by_environment(tmp_path: Path) -> None:
    code = (
        "import airflow_tablestore.client.plainbuffer.implementation as pb;"
        "import airflow_tablestore.client.plainbuffer.decode as d;"
        "print(pb.IMPLEMENTATION, d.decode_rows is d.decode_rows_python)"
    )
    env = {**os.environ, implementation.ENV_VAR: "python"}
    done = subprocess.run([os.sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["python", "True"], done.stderr[-2000:]
    env[implementation.ENV_VAR] = "nonsense"
    done = subprocess.run([os.sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "TABLESTORE_PLAINBUFFER" in done.stderr


def test_random_buffers_decode_identically(compiled: ModuleType) -> None:
    rnd = random.Random(SEED)
    for data in random_buffers(rnd, 400):
        result = assert_same(compiled, data)
        if data[4:]:
            assert result[0] == "ok"
        assert outcome(compiled.decode_rows, bytearray(data)) == outcome(decode.decode_rows_python, bytearray(data))
        view = memoryview(data)
        assert outcome(compiled.decode_rows, view) == outcome(decode.decode_rows_python, view)


def test_one_record_list_of_many_rows(compiled: ModuleType) -> None:
    rnd = random.Random(SEED + 1)
    records = [encode_row(random_row(rnd)) for _ in range(300)]
    assert canon(compiled.decode_record_list(records)) == canon(decode.decode_record_list_python(records))
    assert canon(compiled.decode_rows(encode_rows(map(decode.decode_record_python, records)))) == canon(
        decode.decode_record_list_python(records)
    )


def test_empty_and_2_mb_values(compiled: ModuleType) -> None:
    big_text = "x" * (2 << 20)
    big_blob = random.Random(SEED).randbytes(2 << 20)
    rows = [
        Row((("pk", ""),), (Column("s", "", TS), Column("b", b"", TS))),
        Row((("pk", b""),), (Column("s", big_text, TS), Column("b", big_blob, TS + 1))),
    ]
    data = encode_rows(rows)
    assert assert_same(compiled, data)[0] == "ok"  # (decode_record refuses two rows, identically)
    assert compiled.decode_rows(data) == rows
    for cut in (len(data) - 1, len(data) - 3, len(data) // 2, len(data) - (2 << 20) - 20):
        assert_same(compiled, data[:cut])
    corrupted = bytearray(data)
    corrupted[len(data) // 2] ^= 0x01
    assert assert_same(compiled, bytes(corrupted))[0] == "error"


def test_handmade_buffers_decode_identically(compiled: ModuleType) -> None:
    for data in handmade():
        assert_same(compiled, data)
    inputs: list[Any] = [[117, 0, 0, 0], bytearray(), memoryview(b""), 0, 4, "text", None]
    for value in inputs:
        assert outcome(compiled.decode_rows, value) == outcome(decode.decode_rows_python, value), value
        assert outcome(compiled.decode_record, value) == outcome(decode.decode_record_python, value), value
    assert outcome(compiled.decode_record_list, 5) == outcome(decode.decode_record_list_python, 5)


def test_every_truncation(compiled: ModuleType) -> None:
    rnd = random.Random(SEED + 2)
    samples = [b for b in random_buffers(rnd, 40) if len(b) > 4][:25] + handmade()
    for data in samples:
        for cut in range(len(data)):
            assert_same(compiled, data[:cut])


def test_random_corruptions(compiled: ModuleType) -> None:
    rnd = random.Random(SEED + 3)
    samples = [b for b in random_buffers(rnd, 60) if len(b) > 4] + handmade()[5:]
    tags = list(range(0x00, 0x11)) + [0xFF, 0x80]
    for _ in range(6000):
        data = bytearray(rnd.choice(samples))
        for _ in range(rnd.choice([1, 1, 2, 3])):
            at = rnd.randrange(4, len(data)) if len(data) > 4 else 0
            data[at] = rnd.choice(tags) if rnd.random() < 0.5 else rnd.randrange(256)
        if rnd.random() < 0.2:
            del data[rnd.randrange(len(data)):]
        assert_same(compiled, bytes(data))


def test_random_garbage_after_the_header(compiled: ModuleType) -> None:
    rnd = random.Random(SEED + 4)
    for _ in range(3000):
        body = bytes(rnd.choice([0x01, 0x02, 0x03, 0x04, 0x05, 0x09, 0x0A, 0x0B, 0x00, rnd.randrange(256)])
                     for _ in range(rnd.randrange(1, 40)))
        assert_same(compiled, H + body)


def test_compiled_crc8_matches(compiled: ModuleType) -> None:
    rnd = random.Random(SEED + 5)
    for size in (0, 1, 7, 79, 80, 81, 2047, 2048, 4096, 100_003):
        data = rnd.randbytes(size)
        assert compiled.crc8(data) == crc8_module._crc8_long(data) if size else compiled.crc8(data) == 0
        assert compiled.crc8(bytearray(data)) == compiled.crc8(memoryview(data)) == compiled.crc8(data)
        for start in (0, 0x5A, 0xFF):
            expected = start
            for byte in data:
                expected = crc8_module.CRC8_TABLE[expected ^ byte]
            assert crc8(data, start) == expected


# ---- the official SDK (oracle venv) decodes the same buffers -------------------------------------------------

_SDK_SCRIPT = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from tablestore.plainbuffer.plain_buffer_coded_stream import PlainBufferCodedInputStream
from tablestore.plainbuffer.plain_buffer_stream import PlainBufferInputStream
try:
    from tablestore.native import NATIVE_AVAILABLE, parse_multiple_rows
except Exception:
    NATIVE_AVAILABLE = False

def norm(v):
    if isinstance(v, (bytes, bytearray)):
        return ["x", bytes(v).hex()]
    if isinstance(v, float):
        return ["float", v.hex()]
    return [type(v).__name__, v]

def dump(rows):
    return [[[[n, norm(v)] for n, v in pk], [[n, norm(v), ts] for n, v, ts in attrs]] for pk, attrs in rows]

out, native = [], []
for hexed in json.load(open(sys.argv[1])):
    data = bytes.fromhex(hexed)
    rows = PlainBufferCodedInputStream(PlainBufferInputStream(data)).read_rows()
    out.append(dump((r.primary_key, r.attribute_columns) for r in rows))
    if NATIVE_AVAILABLE:
        native.append(dump(parse_multiple_rows(data)))
print(json.dumps({"python": out, "native": native if NATIVE_AVAILABLE else None}))
"""


def _sdk_norm(value: Any) -> list[Any]:
    if isinstance(value, bytes):
        return ["x", value.hex()]
    if isinstance(value, float):
        return ["float", value.hex()]
    return [type(value).__name__, value]


@pytest.mark.oracle
def test_official_sdk_decodes_the_same_values(compiled: ModuleType, tmp_path: Path) -> None:
    """The SDK reads PUT rows (no sentinels, deletes or sequence info: it has no tunnel support) as we do."""
    from testing.oracle import OracleUnavailable, ensure_oracle_venv

    try:
        python = ensure_oracle_venv()
    except OracleUnavailable as exc:
        pytest.skip(f"official SDK unavailable: {str(exc)[-200:]}")
    rnd = random.Random(SEED + 6)
    buffers = []
    for _ in range(60):
        rows = []
        for i in range(rnd.randrange(1, 5)):
            columns = tuple(
                Column(name, _value(rnd), TS + version)
                for name in rnd.sample(["a", "b", "c", "é"], rnd.randrange(0, 4))
                for version in range(rnd.choice([1, 3]))
            )
            rows.append(Row((("id", i), ("k", _text(rnd) or "k"), ("b", rnd.randbytes(3))), columns))
        buffers.append(encode_rows(rows))
    path = tmp_path / "buffers.json"
    path.write_text(json.dumps([b.hex() for b in buffers]))
    script = tmp_path / "sdk_decode.py"
    script.write_text(_SDK_SCRIPT)
    done = subprocess.run([str(python), str(script), str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    # the SDK's C parser, where it loads (tablestore.native), must agree as well
    for sdk in [answer["python"]] + ([answer["native"]] if answer["native"] is not None else []):
        _compare_with_sdk(compiled, buffers, sdk)


def _compare_with_sdk(compiled: ModuleType, buffers: list[bytes], sdk: list[Any]) -> None:
    for data, sdk_rows in zip(buffers, sdk, strict=True):
        ours = compiled.decode_rows(data)
        assert canon(ours) == canon(decode.decode_rows_python(data))
        mine = [
            [[[n, _sdk_norm(v)] for n, v in r.primary_key], [[c.name, _sdk_norm(c.value), c.timestamp] for c in cols]]
            for r in ours
            for cols in [r.columns]
        ]
        assert json.loads(json.dumps(mine)) == sdk_rows
