"""PlainBuffer bytes straight to Arrow against decode-then-build: the same tables, the same errors.

The straight path (``_speedups.change_log_from_bodies`` / ``flat_from_rows`` over the one parser
``client/plainbuffer/_parse.h``, and ``_speedups.scan_records`` for sequence timestamps) must give exactly what
decoding to records and building Arrow from them gives, for the generators of the decoder's and the builders'
differential tests, and for corrupt input either refuse (the object path then raises its exact error) or, where
the bytes still decode, the same table. Run under ``TABLESTORE_PLAINBUFFER=python`` too: the public entry points
then take the object path, which must give the same answers.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablestore.client.errors import PlainBufferError
from airflow_tablestore.client.model import ActionType, CellOp, Column, Record, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.decode import decode_rows
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
from airflow_tablestore.client.plainbuffer.rows import Rows
from airflow_tablestore.client.records import Records
from airflow_tablestore.client.replica import TOMBSTONE_SUFFIX, is_tombstone
from airflow_tablestore.spark.arrow import changes
from airflow_tablestore.spark.arrow import values as arrow
from airflow_tablestore.spark.arrow.changes import (
    CHANGE_SCHEMA,
    objects_to_arrow_python,
    records_to_arrow,
    records_to_arrow_compiled,
)
from airflow_tablestore.spark.sinks.parquet import _ParquetWriter, partition_of
from spark.arrow.test_changes_compiled import SAMPLES, attribute_columns, flat_case, random_record


def _decoder_tests() -> ModuleType:
    """The decoder's differential tests (tests/client has no package), for their generators."""
    name = "test_plainbuffer_compiled"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[2] / "client" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


handmade = _decoder_tests().handmade
random_row = _decoder_tests().random_row

SEED = 20261126
TS = 1_700_000_000_000
COMPILED = os.environ.get("TABLESTORE_PLAINBUFFER", "").lower() != "python"


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("TABLESTORE_PLAINBUFFER_OPTIONAL") == "1" or not COMPILED:
            return None
        raise


decoder_c = _module("airflow_tablestore.client.plainbuffer._speedups")
arrow_c = decoder_c  # one extension: the decoder and the Arrow builders
needs_c = pytest.mark.skipif(arrow_c is None or not COMPILED, reason="the compiled modules are not in use")


def same(a: Any, b: Any) -> bool:
    """Tables or batches equal; NaN equals NaN (``.equals`` says it does not)."""
    return a.equals(b) or (a.schema == b.schema and repr(a.to_pylist()) == repr(b.to_pylist()))


def outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # the class and message are what must match
        return ("error", type(exc), str(exc))


def encoded(records: list[Record]) -> Records:
    bodies = [encode_row(Row(r.primary_key, r.columns, False, r.sequence)) for r in records]
    return Records.from_bodies(bodies, [int(r.action) for r in records])


def reference(enc: Records, first_index: int = 0) -> Any:
    """Decode-then-build, on a fresh copy (so nothing is cached between the two paths)."""
    copy = Records.from_bodies(enc.bodies, enc.action_types(), enc.origins)
    return outcome(lambda: objects_to_arrow_python(copy.decode(), "ch", "chunk", first_index))


def assert_same_outcome(enc: Records) -> Any:
    """Straight (or its fallback) and decode-then-build give the same table, or the same error; returns the
    latter's outcome."""
    expected = reference(enc)
    got = outcome(lambda: records_to_arrow(enc, "ch", "chunk"))
    if expected[0] == "ok":
        assert got[0] == "ok" and same(got[1], expected[1])
    else:
        assert got == expected
    return expected


def _encodable(record: Record) -> bool:
    try:
        encode_row(Row(record.primary_key, record.columns, False, record.sequence))
    except Exception:
        return False
    return True


# ---- the change log ---------------------------------------------------------------------------------------------


def test_random_records_equal() -> None:
    rng = random.Random(SEED)
    for size in (0, 1, 3, 40, 400):
        records = [r for r in (random_record(rng, large=size < 100) for _ in range(size)) if _encodable(r)]
        enc = encoded(records)
        first = rng.randrange(10**6)
        expected = reference(enc, first)
        assert expected[0] == "ok"
        got = records_to_arrow(enc, "ch", "chunk", first)
        got.validate(full=True)
        assert got.schema == CHANGE_SCHEMA
        assert same(got, expected[1])
        if arrow_c is not None and COMPILED:
            assert records_to_arrow_compiled(enc, "ch", "chunk", first) is not None


def test_decoder_generator_rows_equal_or_same_error() -> None:
    """The decoder tests' rows: every value type, the key sentinels (the builder's TypeError), ops, versions."""
    rng = random.Random(SEED + 1)
    for _ in range(300):
        rows = [random_row(rng) for _ in range(rng.randrange(1, 6))]
        assert_same_outcome(Records.from_bodies([encode_row(r) for r in rows],
                                                       [rng.choice([1, 2, 3]) for _ in rows]))


@needs_c
def test_edge_records() -> None:
    records = [
        Record(ActionType.PUT_ROW, (("k", ""),), (Column("", "", None), Column("b", b"", TS)), None),
        Record(ActionType.DELETE_ROW, (("k", b"\x00"),), (), SequenceInfo(-(2**31), -1, 2**31 - 1)),
        Record(ActionType.UPDATE_ROW, (("k", -(2**63)),),
               (Column("x", None, None, CellOp.DELETE_ALL_VERSIONS), Column("x", None, TS, CellOp.DELETE_ONE_VERSION),
                Column("n", 5, None, CellOp.INCREMENT), Column("d", float("nan"), TS), Column("t", True, 0)),
               SequenceInfo(0, 2**62, 0)),
    ]
    enc = encoded(records)
    got = records_to_arrow_compiled(enc, "ch", "chunk", 7)
    assert got is not None
    assert same(got, reference(enc, 7)[1])


def corruptions(rng: random.Random, body: bytes, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        data = bytearray(body)
        for _ in range(rng.choice([1, 1, 2])):
            at = rng.randrange(len(data))
            data[at] = rng.choice([0x00, 0x01, 0x03, 0x05, 0x09, 0x0A, 0x0B, 0xFF, rng.randrange(256)])
        if rng.random() < 0.2:
            del data[rng.randrange(len(data)):]
        out.append(bytes(data))
    return out


def test_corrupt_records_same_outcome() -> None:
    rng = random.Random(SEED + 2)
    records = [r for r in (random_record(rng, large=False) for _ in range(30)) if _encodable(r)]
    good = encoded(records)
    bad_inputs = [body for body in good.bodies for body in corruptions(rng, body, 25)]
    bad_inputs += handmade() + [b"", b"\x75\x00\x00\x00", good.bodies[0] + good.bodies[1]]
    for bad in bad_inputs:
        at = rng.randrange(len(good) + 1)
        bodies = [*good.bodies[:at], bad, *good.bodies[at:]]
        enc = Records.from_bodies(bodies, good.actions[:at] + b"\x02" + good.actions[at:])
        if assert_same_outcome(enc)[0] == "error" and arrow_c is not None and COMPILED:
            assert records_to_arrow_compiled(enc, "ch", "chunk") is None, bad
    unknown = Records.from_bodies(good.bodies[:2], b"\x01\x07")
    assert outcome(lambda: records_to_arrow(unknown, "ch", "chunk")) == reference(unknown)
    assert reference(unknown)[0] == "error"


def test_origin_records_are_checked_not_kept() -> None:
    """The change log has no place for origin records: the straight path checks them as decoding does (a corrupt
    one falls back, and the object path raises its error) and builds the same table."""
    rng = random.Random(SEED + 3)
    records = [r for r in (random_record(rng, large=False) for _ in range(5)) if _encodable(r)]
    good = encoded(records)
    enc = Records.from_bodies(good.bodies, good.actions, [good.bodies[0]] + [b""] * (len(good) - 1))
    assert same(records_to_arrow(enc, "ch", "chunk"), reference(good)[1])
    if arrow_c is not None and COMPILED:
        assert records_to_arrow_compiled(enc, "ch", "chunk") is not None
    for bad in [*corruptions(rng, good.bodies[1], 30), good.bodies[0] + good.bodies[1][4:], b"\x75\x00\x00\x00"]:
        enc = Records.from_bodies(good.bodies, good.actions, [b"", bad] + [b""] * (len(good) - 2))
        if assert_same_outcome(enc)[0] == "error" and arrow_c is not None and COMPILED:
            assert records_to_arrow_compiled(enc, "ch", "chunk") is None


def test_from_messages_keeps_out_of_range_action_types() -> None:
    class Message:
        def __init__(self, action_type: int, record: bytes) -> None:
            self.action_type, self.record, self.origin_record = action_type, record, b""

    body = encode_row(Row((("k", 1),), ()))
    enc = Records.from_messages([Message(1, body), Message(300, body)])
    assert enc.actions == b"\x01\x00"
    with pytest.raises(PlainBufferError, match="unknown tunnel record action type 300"):
        enc.scan()
    assert outcome(lambda: records_to_arrow(enc, "ch", "chunk"))[2].endswith("action type 300")


# ---- sequence timestamps ----------------------------------------------------------------------------------------


def _scan_reference(records: list[Record], until: int | None, start: int) -> tuple[int, int | None]:
    first, newest = len(records), None
    for i, record in enumerate(records[start:], start):
        if record.sequence is None:
            continue
        ts = record.sequence.timestamp
        if until is not None and first == len(records) and ts >= until:
            first = i
        newest = ts if newest is None else max(newest, ts)
    return first, newest


def test_scan_matches_the_records() -> None:
    rng = random.Random(SEED + 4)
    for _ in range(100):
        records = [r for r in (random_record(rng, large=False) for _ in range(rng.randrange(8))) if _encodable(r)]
        enc = encoded(records)
        until = rng.choice([None, 0, 2**61, rng.randrange(2**62)])
        start = rng.randrange(len(records) + 1)
        assert enc.scan(until, start) == _scan_reference(records, until, start)
        if decoder_c is not None and COMPILED:
            assert decoder_c.scan_records(enc.data, enc.spans, until, start, False) == _scan_reference(
                records, until, start)


def test_scan_of_corrupt_records_raises_the_decoder_error() -> None:
    rng = random.Random(SEED + 5)
    records = [r for r in (random_record(rng, large=False) for _ in range(10)) if _encodable(r)]
    good = encoded(records)
    for bad in [body for body in good.bodies for body in corruptions(rng, body, 10)]:
        enc = Records.from_bodies([*good.bodies, bad], good.actions + b"\x01")
        copy = Records.from_bodies(enc.bodies, enc.actions)
        expected = outcome(copy.decode)
        got = outcome(lambda: enc.scan(None, 0))  # noqa: B023
        if expected[0] == "error":
            assert got == expected
        else:
            assert got == ("ok", _scan_reference(expected[1], None, 0))


# ---- the Parquet sink's split by commit time ----------------------------------------------------------------


@pytest.mark.parametrize("partition_by", ["none", "hour", "day"])
def test_parquet_split_of_the_table_matches_the_records(partition_by: str) -> None:
    rng = random.Random(SEED + 6)
    hour = 3_600_000_000
    records = []
    for i in range(200):
        record = random_record(rng, large=False)
        seq = None if rng.random() < 0.1 else SequenceInfo(0, 1_700_000_000_000_000 + (i // 7) * hour // 3, i)
        record = Record(record.action, record.primary_key, record.columns, seq)
        if _encodable(record):
            records.append(record)
    writer = _ParquetWriter("/nonexistent", "ch", "token", 1, partition_by)
    table = objects_to_arrow_python(records, "ch", writer._chunk, 0)
    runs: list[tuple[str, list[Record]]] = []  # consecutive runs of records by partition
    for record in records:
        partition = "all" if partition_by == "none" else partition_of(
            record.sequence.timestamp if record.sequence else None, partition_by)
        if runs and runs[-1][0] == partition:
            runs[-1][1].append(record)
        else:
            runs.append((partition, [record]))
    split = writer._split_table(table)
    assert [p for p, _ in split] == [p for p, _ in runs]
    assert [t.num_rows for _, t in split] == [len(g) for _, g in runs]
    assert pa.concat_tables([t for _, t in split]).equals(table)


# ---- GetRange -> flat batches -------------------------------------------------------------------------------------


def _object_batch(converter: arrow.RowsToArrow, data: bytes, fence: str | None, drop_empty: bool,
                  ignored: str | None) -> Any:
    def run() -> pa.RecordBatch:
        rows = decode_rows(data) if data else []
        if fence is not None:
            rows = [row for row in rows if not is_tombstone(row.columns, fence)]
        if drop_empty:
            rows = [row for row in rows if any(c.name != ignored for c in row.columns)]
        return converter.batch(rows)

    return outcome(run)


def _flat_rows(rng: random.Random, n: int, cells: list[tuple[str, Any]], keys: list[Any]) -> list[Row]:
    """The builders' test rows, plus fence cells: tombstones, live fences, and rows of the fence alone."""
    rows = []
    for r in range(n):
        pk = tuple((f"pk{i}", SAMPLES[kind](rng)) for i, kind in enumerate(keys))
        columns = []
        shape = rng.random()
        if shape < 0.2:  # a tombstone, or a fence alone that is not one
            for v in range(rng.choice([1, 2])):
                value = rng.choice([f"{r}{TOMBSTONE_SUFFIX}", f"{r}-live", 5, b"x-deleted", TOMBSTONE_SUFFIX])
                columns.append(Column("_tunnel_seq", value, rng.choice([TS - v, TS, None])))
        elif shape < 0.25:
            pass  # no attribute column at all
        else:
            columns = attribute_columns(rng, r, cells, nulls=False)  # the encoder writes no NULL (handmade() has them)
            if rng.random() < 0.3:
                columns.append(Column("_tunnel_seq", f"{r}{TOMBSTONE_SUFFIX}", TS))
        rows.append(Row(pk, tuple(sorted(columns, key=lambda c: c.name))))
    return rows


def test_flat_random_pages_equal() -> None:
    rng = random.Random(SEED + 7)
    for case in range(60):
        permissive, failfast, cells, keys = flat_case(rng, corrupt=case % 2 == 0)
        rows = _flat_rows(rng, rng.choice([0, 1, 5, 200]), cells, keys)
        data = encode_rows(rows) if rows else b""
        for converter in (permissive, failfast):
            for fence, drop_empty, ignored in [(None, False, None), ("_tunnel_seq", False, None),
                                               ("_tunnel_seq", True, "_tunnel_seq"), (None, True, None)]:
                expected = _object_batch(converter, data, fence, drop_empty, ignored)
                whole = outcome(lambda: converter.page(Rows(data), tombstone_fence=fence,  # noqa: B023
                                                       drop_empty=drop_empty, ignored=ignored))  # noqa: B023
                assert whole[0] == expected[0]
                assert same(whole[1], expected[1]) if whole[0] == "ok" else whole == expected
                got = converter.page_compiled(Rows(data), tombstone_fence=fence, drop_empty=drop_empty,
                                              ignored=ignored)
                if arrow_c is None or not COMPILED:
                    assert got is None
                    continue
                if got is None:  # refused: a cell that does not fit its column (the object path reports it)
                    continue
                got.validate(full=True)
                assert expected[0] == "ok" and same(got, expected[1]), (got.to_pylist()[:2], expected)


@needs_c
def test_flat_straight_path_is_taken_for_fitting_cells() -> None:
    rng = random.Random(SEED + 8)
    taken = 0
    for case in range(40):
        permissive, _, cells, keys = flat_case(rng, corrupt=case % 2 == 0)
        rows = [Row(r.primary_key, tuple(c for c in r.columns if c.name != "other"))
                for r in _flat_rows(rng, 50, cells, keys) if r.columns and r.columns[0].name != "_tunnel_seq"]
        got = permissive.page_compiled(Rows(encode_rows(rows) if rows else b""), tombstone_fence="_tunnel_seq")
        taken += got is not None
    assert taken >= 30


def test_flat_corrupt_pages_same_outcome() -> None:
    rng = random.Random(SEED + 9)
    permissive, _, cells, keys = flat_case(random.Random(3), corrupt=True)
    rows = _flat_rows(rng, 12, cells, keys)
    data = encode_rows(rows)
    for bad in corruptions(rng, data, 600) + [data[:4], data[:3], b"\x76" + data[1:]]:
        expected = _object_batch(permissive, bad, "_tunnel_seq", False, None)
        got = outcome(lambda: permissive.page_compiled(Rows(bad), tombstone_fence="_tunnel_seq"))  # noqa: B023
        assert got[0] == "ok"
        if got[1] is not None:
            assert expected[0] == "ok" and same(got[1], expected[1])
        whole = outcome(lambda: permissive.page(Rows(bad), tombstone_fence="_tunnel_seq"))  # noqa: B023
        assert same(whole[1], expected[1]) if expected[0] == "ok" else whole == expected


def test_the_compiled_switch() -> None:
    """Under TABLESTORE_PLAINBUFFER=python the straight path is off and everything decodes."""
    assert (changes._change_log_from_bodies is not None) == (COMPILED and arrow_c is not None)
    assert (arrow._flat_from_rows is not None) == (COMPILED and arrow_c is not None)


@pytest.mark.parametrize("partition_by", ["none", "day"])
def test_parquet_writer_straight_and_from_objects(tmp_path: Path, partition_by: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The sink's staged files are the same whether a round's answers become Arrow straight from their bytes or
    decoded and built from the record objects (the straight path switched off)."""
    import pyarrow.parquet as pq

    from airflow_tablestore.spark.sinks.parquet import ParquetSink

    rng = random.Random(SEED + 10)
    day = 86_400_000_000
    records = []
    for i in range(120):
        record = random_record(rng, large=False)
        seq = None if i < 10 else SequenceInfo(0, 1_700_000_000_000_000 + (i // 40) * day, i)
        record = Record(record.action, record.primary_key, record.columns, seq)
        if _encodable(record):
            records.append(record)
    staged = {}
    for name in ("objects", "straight"):
        with monkeypatch.context() as patched:
            if name == "objects":
                patched.setattr(changes, "_change_log_from_bodies", None)
            payload = encoded(records)
            writer = ParquetSink(str(tmp_path / name), partition_by).open("ch", "start", 1)
            writer.write(payload[:50])
            writer.write(payload[50:])
            assert writer.close("end") == len(records)
        files = sorted((tmp_path / name / "_staging").rglob("*.parquet"))
        staged[name] = {f.name: pq.read_table(f) for f in files}
    assert staged["objects"].keys() == staged["straight"].keys()
    assert len(staged["objects"]) == (1 if partition_by == "none" else 4)
    for file, table in staged["objects"].items():
        assert same(staged["straight"][file], table)


# ---- span reads: sequence timestamps scanned in C or read from the decoded records ---------------------------


class _Message:
    def __init__(self, action_type: int, record: bytes, origin_record: bytes = b"") -> None:
        self.action_type, self.record, self.origin_record = action_type, record, origin_record


class _FakeTunnel:
    """ReadRecords answers by token: (messages, next token); may_more is always True (a base channel)."""

    def __init__(self, answers: dict[str, tuple[list[_Message], str]]) -> None:
        self.answers = answers

    def read_records(self, tunnel_id: str, client_id: str, channel_id: str, token: str) -> Any:
        from airflow_tablestore.client.tunnel.reads import ReadResult

        messages, next_token = self.answers[token]
        return ReadResult(Records.from_messages(messages), next_token, True, 100)


def test_span_reads_scanned_and_decoded_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """A span read gives the same records, end and errors whether its answers' sequence timestamps are scanned in C
    or read from the decoded records (the compiled scan switched off)."""
    from airflow_tablestore.client import records as records_module
    from airflow_tablestore.client.tunnel.span import Position, Span, SpanRead

    rng = random.Random(SEED + 11)
    for _ in range(60):
        answers: dict[str, tuple[list[_Message], str]] = {}
        ts = 0
        tokens = [f"t{i}" for i in range(rng.randint(1, 4))] + ["finished"]
        for token, next_token in zip(tokens, tokens[1:], strict=False):
            messages = []
            for _ in range(rng.randint(0, 6)):
                ts += rng.choice([0, 5, 10])
                row = Row((("k", rng.randrange(100)),), (Column("c", rng.randrange(9), TS),), False,
                          None if rng.random() < 0.2 else SequenceInfo(0, ts, 0))
                messages.append(_Message(rng.choice([1, 2, 3]), encode_row(row)))
            answers[token] = (messages, next_token)
        if rng.random() < 0.2:  # a corrupt record somewhere: both reads raise the same error at the same answer
            token = rng.choice(tokens[:-1])
            if answers[token][0]:
                answers[token][0][-1].record = answers[token][0][-1].record[:-1] + b"\x00"
        span = Span(Position("t0", rng.randint(0, 2)), rng.randint(1, 12), rng.choice([None, 10, 40, 10**6]))
        whole = rng.random() < 0.5

        def run(scanned: bool, span: Span = span, whole: bool = whole, answers: Any = answers) -> Any:
            with monkeypatch.context() as patched:
                if not scanned:
                    patched.setattr(records_module, "_scan", None)
                read = SpanRead(_FakeTunnel(answers), "tn", "cl", "ch", span, whole_answers=whole)
                chunks = outcome(lambda: [c.decode() for c in read])
            return chunks, read.end, read.reads

        assert run(True) == run(False)
