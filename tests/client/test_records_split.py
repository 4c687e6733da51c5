"""ReadRecords answers kept encoded: the C split of the answer's bytes against the protobuf runtime, and
:class:`Records` slicing and joining.

``split_read_records`` must give, for every answer it accepts, exactly the records, token and hint the protobuf
runtime parses; every answer it refuses (None) goes to the protobuf runtime, so the client's result is the same
either way (checked through a real HTTP server for the odd shapes).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from airflow_tablestore.client import records
from airflow_tablestore.client.model import Column, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.encode import encode_row
from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION
from airflow_tablestore.client.records import Records, split_read_records
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.tunnel import client as tunnel_client
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2  # generated module without stubs

COMPILED = IMPLEMENTATION == "c"
needs_c = pytest.mark.skipif(not COMPILED, reason="the compiled module is not in use")


def _parsed(body: bytes) -> Any:
    message = tunnel_pb2.ReadRecordsResponse()
    message.MergeFromString(body)
    return message


def _same_as_protobuf(body: bytes) -> None:
    """split_read_records(body) is None, or says what the protobuf runtime parses."""
    split = split_read_records(body)
    if split is None:
        return
    enc, token, may_more = split
    message = _parsed(body)
    assert token == message.next_token
    assert may_more == (message.may_more_record if message.HasField("may_more_record") else None)
    assert enc.bodies == [r.record for r in message.records]
    assert enc.action_types() == [r.action_type for r in message.records]
    origins = [r.origin_record for r in message.records]
    assert enc.origins == (origins if any(origins) else None)
    assert enc.data is body  # the answer itself: nothing copied


def _random_answer(rng: random.Random) -> bytes:
    """An answer with its fields in a random order (protobuf merges them: the same message)."""
    pieces = []
    for _ in range(rng.choice([0, 1, 2, 7, 60])):
        record = tunnel_pb2.Record(action_type=rng.choice([1, 2, 3]),
                                   record=rng.randbytes(rng.choice([0, 1, 40, 300])))
        if rng.random() < 0.3:
            record.origin_record = rng.randbytes(rng.choice([0, 5, 200]))
        pieces.append(tunnel_pb2.ReadRecordsResponse(records=[record]).SerializePartialToString())
    pieces.append(tunnel_pb2.ReadRecordsResponse(next_token=rng.choice(["", "finished", "tök€n" * 30]))
                  .SerializePartialToString())
    if rng.random() < 0.6:
        pieces.append(tunnel_pb2.ReadRecordsResponse(may_more_record=rng.random() < 0.5).SerializePartialToString())
    if rng.random() < 0.5:
        rng.shuffle(pieces)
    return b"".join(pieces)


@needs_c
def test_split_equals_protobuf_on_random_answers() -> None:
    rng = random.Random(22)
    for _ in range(400):
        body = _random_answer(rng)
        assert split_read_records(body) is not None
        _same_as_protobuf(body)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    tag = _varint(number << 3 | wire_type)
    return tag + (_varint(len(payload)) + payload if wire_type == 2 else payload)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


BODY = encode_row(Row((("id", 7),), (Column("v", "x", 1000),), False, SequenceInfo(1, 2_000_000, 3)))
RECORD = _field(1, 0, b"\x01") + _field(2, 2, BODY)
TOKEN = _field(2, 2, b"tok")

ODD_ANSWERS = {
    "empty body (no token)": b"",
    "token twice": TOKEN + _field(2, 2, b"other"),
    "may_more twice": TOKEN + _field(3, 0, b"\x01") + _field(3, 0, b"\x00"),
    "unknown top-level field": _field(1, 2, RECORD) + TOKEN + _field(9, 0, b"\x05"),
    "action 0": _field(1, 2, _field(1, 0, b"\x00") + _field(2, 2, BODY)) + TOKEN,
    "action 4": _field(1, 2, _field(1, 0, b"\x04") + _field(2, 2, BODY)) + TOKEN,
    "action 300": _field(1, 2, _field(1, 0, _varint(300)) + _field(2, 2, BODY)) + TOKEN,
    "action -1": _field(1, 2, _field(1, 0, _varint(-1)) + _field(2, 2, BODY)) + TOKEN,
    "no action": _field(1, 2, _field(2, 2, BODY)) + TOKEN,
    "no body": _field(1, 2, _field(1, 0, b"\x02")) + TOKEN,
    "body twice": _field(1, 2, RECORD + _field(2, 2, BODY)) + TOKEN,
    "unknown record field": _field(1, 2, RECORD + _field(7, 2, b"zz")) + TOKEN,
    "padded tag": b"\x8a\x00" + _varint(len(RECORD)) + RECORD + TOKEN,
    "six-byte tag": b"\x8a\x80\x80\x80\x80\x00" + _varint(len(RECORD)) + RECORD + TOKEN,
    "padded length": b"\x0a" + bytes([0x80 | len(RECORD), 0x00]) + RECORD + TOKEN,
    "six-byte length": b"\x0a" + bytes([0x80 | len(RECORD), 0x80, 0x80, 0x80, 0x80, 0x00]) + RECORD + TOKEN,
    "padded action": _field(1, 2, b"\x08\x81\x00" + _field(2, 2, BODY)) + TOKEN,
    "may_more 2": TOKEN + _field(3, 0, b"\x02"),
    "token not UTF-8": _field(1, 2, RECORD) + _field(2, 2, b"\xff\xfe"),
    "truncated record": (_field(1, 2, RECORD) + TOKEN)[:len(RECORD) // 2],
    "length past the end": b"\x0a\xff\xff\xff\x0f" + RECORD + TOKEN,
    "eleven-byte varint": b"\x18" + b"\xff" * 10 + b"\x01" + TOKEN,
    "wrong wire type": _field(1, 0, b"\x01") + TOKEN,
    "plain": _field(1, 2, RECORD) + _field(1, 2, RECORD) + TOKEN + _field(3, 0, b"\x01"),
    "origin record": _field(1, 2, RECORD + _field(3, 2, BODY)) + TOKEN,
}


@needs_c
@pytest.mark.parametrize("name", sorted(ODD_ANSWERS))
def test_odd_answers_fall_back_or_agree(name: str) -> None:
    body = ODD_ANSWERS[name]
    try:
        _parsed(body)
    except Exception:  # noqa: BLE001 - not a message at all: the split must refuse it
        assert split_read_records(body) is None
        return
    _same_as_protobuf(body)
    if name in ("plain", "origin record", "may_more 2"):
        assert split_read_records(body) is not None
    if name.startswith(("padded", "six-byte")):  # runtimes differ on these: left to the one in use
        assert split_read_records(body) is None


def _outcome(fn: Any) -> Any:
    try:
        result = fn()
        found = result.records.decode()
    except Exception as exc:  # noqa: BLE001 - the class, code and message are what must match
        return ("error", type(exc), getattr(exc, "code", None), str(exc))
    return ("ok", found, result.next_token, result.may_more, result.size_bytes)


@pytest.mark.parametrize("name", sorted(ODD_ANSWERS))
def test_the_client_reads_every_answer_alike(scripted: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_records(...).records.decode() gives what the protobuf runtime's parse gives, errors included, whichever
    way the answer was split (the C split, or the runtime's parse when the split is switched off)."""
    body = ODD_ANSWERS[name]
    client = TunnelClient(scripted.endpoint, "ak", "secret", "inst", retry=RetryPolicy.no_retry())
    with client:
        with monkeypatch.context() as patched:
            patched.setattr(tunnel_client, "split_read_records", lambda body: None)
            scripted.script(scripted.Reply(200, body))
            expected = _outcome(lambda: client.read_records("t", "c", "ch", "tok"))
        scripted.script(scripted.Reply(200, body))
        assert _outcome(lambda: client.read_records("t", "c", "ch", "tok")) == expected


def _records(rng: random.Random, count: int) -> Records:
    bodies = [rng.randbytes(rng.randrange(1, 30)) for _ in range(count)]
    origins = [rng.randbytes(rng.randrange(0, 3)) if rng.random() < 0.3 else b"" for _ in range(count)]
    return Records.from_bodies(bodies, [rng.choice([1, 2, 3]) for _ in range(count)], origins)


def _lists(enc: Records) -> tuple[list[bytes], list[int], list[bytes]]:
    return enc.bodies, list(enc.action_types()), enc.origins or [b""] * len(enc)


@pytest.mark.parametrize("compiled_shift", [True, False] if COMPILED else [False])
def test_slices_and_joins_keep_every_record(monkeypatch: pytest.MonkeyPatch, compiled_shift: bool) -> None:
    if not compiled_shift:
        monkeypatch.setattr(records, "_shift", None)
    rng = random.Random(5)
    for _ in range(100):
        parts = [_records(rng, rng.randrange(0, 6)) for _ in range(rng.randrange(0, 4))]
        joined = Records.concat(parts)
        expected = [sum((_lists(p)[k] for p in parts), []) for k in range(3)]
        assert list(_lists(joined)) == expected
        one = _records(rng, 9)
        for index in (slice(2, 5), slice(None, None, 2), slice(None, None, -1), slice(7, 3), slice(-3, None)):
            bodies, actions, origins = _lists(one)
            assert _lists(one[index]) == (bodies[index], actions[index], origins[index])
        halves = [one[:4], one[4:]]  # parts of one answer share its buffer: joined without a copy
        assert Records.concat(halves).data is one.data
        assert _lists(Records.concat(halves)) == _lists(one)


def test_spans_must_match_the_actions() -> None:
    with pytest.raises(ValueError, match="one entry per record"):
        Records(b"abc", records.pack_spans([1, 2]), b"\x01")


def _loop(enc: Records) -> Any:
    """The per-record Python loop over the compiled decoder (what decode() falls back to)."""
    try:
        return ("ok", records._decode(zip(enc.action_types(), enc.bodies, enc.origins or [b""] * len(enc),
                                          strict=True)))
    except Exception as exc:  # noqa: BLE001 - the class and message are what must match
        return ("error", type(exc), str(exc))


def _decoded(enc: Records) -> Any:
    try:
        return ("ok", enc.decode())
    except Exception as exc:  # noqa: BLE001
        return ("error", type(exc), str(exc))


@needs_c
def test_decode_in_place_equals_the_loop() -> None:
    """decode() in C over the one buffer gives the loop's records, or falls back to it and raises its error:
    random rows of every kind (the decoder tests' generator), origin records, truncations and corruptions."""
    from client.test_plainbuffer_compiled import canon, handmade, random_row

    rng = random.Random(23)
    taken = 0
    for case in range(400):
        bodies = [encode_row(random_row(rng)) for _ in range(rng.choice([0, 1, 3, 30]))]
        origins = [encode_row(random_row(rng)) if rng.random() < 0.2 else b"" for _ in bodies]
        if bodies and case % 3 == 0:  # one damaged body or origin record
            at = rng.randrange(len(bodies))
            bad = bytearray(rng.choice([bodies, origins])[at] or bodies[at])
            if case % 2 == 0:
                del bad[rng.randrange(len(bad)):]
            else:
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            (origins if origins[at] and case % 4 == 0 else bodies)[at] = bytes(bad)
        if bodies and case % 7 == 0:
            bodies[0] = rng.choice(handmade())
        enc = Records.from_bodies(bodies, [rng.choice([1, 2, 3]) for _ in bodies], origins)
        expected = _loop(enc)
        assert canon(_decoded(enc)) == canon(expected)  # canon: NaN by its bits, types kept apart
        taken += records._decode_in(enc.data, enc.spans, enc.actions, enc.origin_spans, records.Record,
                                    records._MEMBERS) is not None
        assert (expected[0] == "ok") >= (records._decode_in(enc.data, enc.spans, enc.actions, enc.origin_spans,
                                                            records.Record, records._MEMBERS) is not None)
    assert taken > 150
