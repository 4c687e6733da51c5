"""PlainBuffer codec benchmark: ours (compiled and pure Python) vs the official SDK (pure Python and C), same bytes.

Run: ``.venv/bin/python -m benchmarks.bench_plainbuffer [--rows 20000] [--repeat 5]``

Our decoder is timed twice in one run: the compiled one (``client/plainbuffer/_speedups.c``, when built) and the
pure-Python one (``decode_*_python``). The SDK is timed with its pure-Python codec and, where it loads, its C
PlainBuffer parser ``tablestore.native`` (``parse_multiple_rows`` / ``parse_single_row``).

Four workloads, each timed best-of-``repeat`` in this process and in the oracle venv back to back (CPU time
of the process, ``time.process_time``, so that other load on a shared machine does not skew the ratio):

* decode a GetRange response: one header + ``rows`` rows of 2 PK + 10 attribute columns with timestamps;
* decode tunnel records: ``rows`` single-row messages with the sequence-info extension (the SDK has no tunnel
  support and cannot parse the extension, so its baseline reads the same rows without it);
* encode PutRow rows (the SDK's ``PlainBufferBuilder.serialize_for_put_row``); the bytes must be identical;
* decode ``rows / 10`` rows carrying a 4 KB string and a 4 KB binary value (long-value CRC path).

Results are checked for equality across both sides (a digest of the decoded values, a digest of the
encoded bytes) before any number is printed; the SDK's C parser must decode to the same values too.

``--arrow`` times, instead, PlainBuffer bytes -> Arrow in this process (no SDK): ``rows`` tunnel records to the
change log and a GetRange page of ``rows`` rows to a flat batch, straight from the bytes in C
(``records_to_arrow_compiled`` / ``RowsToArrow.page_compiled``) against decoding to objects and building from
them (the compiled decoder and builders), plus the pure-Python path; the tables must be equal.
The same for a page whose attribute columns are versioned (``list<struct<timestamp, value>>``, 3 versions each)
and for the records as the streaming source's user-schema batch (``ChangeOutput.batches``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import Column, Row, SequenceInfo
from airflow_tablestore.client.plainbuffer.decode import (
    decode_record,
    decode_record_list,
    decode_record_list_python,
    decode_record_python,
    decode_rows,
    decode_rows_python,
)
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION
from testing.oracle import SDK_REQUIREMENT, OracleUnavailable, run_in_oracle

BASE_TS = 1_700_000_000_000

# Runs inside the oracle venv. argv: data directory, repeat. Prints one JSON object.
_SDK_SCRIPT = r'''
import hashlib, json, logging, sys, time
logging.disable(logging.CRITICAL)
from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder
from tablestore.plainbuffer.plain_buffer_coded_stream import PlainBufferCodedInputStream
from tablestore.plainbuffer.plain_buffer_stream import PlainBufferInputStream
try:
    from tablestore.native import NATIVE_AVAILABLE, parse_multiple_rows, parse_single_row
except Exception:
    NATIVE_AVAILABLE = False

data_dir, repeat = sys.argv[1], int(sys.argv[2])
getrange = open(data_dir + "/getrange.bin", "rb").read()
large = open(data_dir + "/large.bin", "rb").read()
plain_records = [bytes.fromhex(h) for h in json.load(open(data_dir + "/plain_records.json"))]
spec = json.load(open(data_dir + "/rows.json"))

def value(v):
    kind, raw = v
    return bytearray.fromhex(raw) if kind == "x" else raw

rows_in = [([(n, value(v)) for n, v in pk], [(n, value(v), ts) for n, v, ts in cols]) for pk, cols in spec]

def best(fn):
    times = []
    for _ in range(repeat):
        t0 = time.process_time(); out = fn(); times.append(time.process_time() - t0)
    return min(times), out

def read_rows():
    return PlainBufferCodedInputStream(PlainBufferInputStream(getrange)).read_rows()

def read_records():
    return [PlainBufferCodedInputStream(PlainBufferInputStream(r)).read_row() for r in plain_records]

def encode():
    return [PlainBufferBuilder.serialize_for_put_row(pk, cols) for pk, cols in rows_in]

def norm(v):
    if isinstance(v, (bytes, bytearray)):
        return ["x", bytes(v).hex()]
    return [type(v).__name__, v]

def digest(rows):
    h = hashlib.sha256()
    for pk, attrs in rows:
        h.update(json.dumps([[[n, norm(v)] for n, v in pk], [[n, norm(v), ts] for n, v, ts in attrs]]).encode())
    return h.hexdigest()

t_decode, decoded = best(read_rows)
t_records, records = best(read_records)
t_encode, encoded = best(encode)
t_large, decoded_large = best(lambda: PlainBufferCodedInputStream(PlainBufferInputStream(large)).read_rows())
result = {
    "large_s": t_large,
    "large_digest": digest((r.primary_key, r.attribute_columns) for r in decoded_large),
    "decode_s": t_decode,
    "decode_digest": digest((r.primary_key, r.attribute_columns) for r in decoded),
    "records_s": t_records,
    "records_digest": digest(records),
    "encode_s": t_encode,
    "encode_digest": hashlib.sha256(b"".join(bytes(e) for e in encoded)).hexdigest(),
}
if NATIVE_AVAILABLE:
    t_native, native_rows = best(lambda: parse_multiple_rows(getrange))
    result["native_decode_s"] = t_native
    result["native_decode_digest"] = digest(native_rows)
    t_native, native_records = best(lambda: [parse_single_row(r) for r in plain_records])
    result["native_records_s"] = t_native
    result["native_records_digest"] = digest(native_records)
    t_native, native_large = best(lambda: parse_multiple_rows(large))
    result["native_large_s"] = t_native
    result["native_large_digest"] = digest(native_large)
print(json.dumps(result))
'''


def make_large_rows(count: int, seed: int = 8) -> list[Row]:
    """``count`` rows with one 4 KB string and one 4 KB binary value each (documents, payloads)."""
    rnd = random.Random(seed)
    ts = BASE_TS
    return [
        Row(
            (("id", i),),
            (
                Column("blob", rnd.randbytes(4096), ts),
                Column("doc", "".join(rnd.choice("abcdefgh {}:,") for _ in range(4096)), ts),
            ),
        )
        for i in range(count)
    ]


def make_rows(count: int, seed: int = 7) -> list[Row]:
    """``count`` rows shaped like a typical wide table: 2 PK columns, 10 attributes of every type."""
    rnd = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    rows = []
    for i in range(count):
        ts = BASE_TS + rnd.randrange(10_000_000)
        columns = (
            Column("amount", rnd.randrange(-(10**12), 10**12), ts),
            Column("city", rnd.choice(words), ts),
            Column("comment", " ".join(rnd.choice(words) for _ in range(8)), ts),
            Column("count", rnd.randrange(1000), ts),
            Column("deleted", rnd.random() < 0.1, ts),
            Column("digest", rnd.randbytes(16), ts),
            Column("price", rnd.random() * 1000, ts),
            Column("ratio", rnd.random(), ts),
            Column("status", rnd.choice(["NEW", "PAID", "SHIPPED"]), ts),
            Column("updated_ms", ts, ts),
        )
        rows.append(Row((("id", i), ("tenant", f"tenant-{i % 97:03d}")), columns))
    return rows


def _norm(value: Any) -> list[Any]:
    if isinstance(value, (bytes, bytearray)):
        return ["x", bytes(value).hex()]
    return [type(value).__name__, value]


def _digest(rows: Sequence[Row]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        pk = [[n, _norm(v)] for n, v in row.primary_key]
        attrs = [[c.name, _norm(c.value), c.timestamp] for c in row.columns]
        digest.update(json.dumps([pk, attrs]).encode())
    return digest.hexdigest()


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times = []
    out: Any = None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return min(times), out


def _spec(rows: Sequence[Row]) -> list[Any]:
    """JSON description of the rows for the SDK side (BINARY as hex, to become a bytearray there)."""

    def value(v: Any) -> list[Any]:
        return ["x", v.hex()] if isinstance(v, bytes) else ["v", v]

    return [
        [[[n, value(v)] for n, v in row.primary_key], [[c.name, value(c.value), c.timestamp] for c in row.columns]]
        for row in rows
    ]


def arrow_straight(count: int, repeat: int) -> int:
    """Bytes -> Arrow: straight from the bytes vs decode-then-build, same run; prints the times and ratios.

    The change log starts from a ReadRecords answer's bytes (split in C vs parsed by protobuf and decoded), the
    flat batch from a GetRange page's rows bytes; then the same page with every attribute column versioned (3
    versions each) and the answer's records as the streaming source's user-schema batch (key, newest PUT values,
    the action)."""
    import pyarrow as pa

    from airflow_tablestore.client.model import ColumnType
    from airflow_tablestore.client.plainbuffer.rows import Rows
    from airflow_tablestore.client.records import Records, decode_records, split_read_records
    from airflow_tablestore.protocol import ots_tunnel_pb2
    from airflow_tablestore.spark.arrow.changes import (
        objects_to_arrow_compiled,
        objects_to_arrow_python,
        records_to_arrow_compiled,
    )
    from airflow_tablestore.spark.arrow.values import CELL, KEY, VERSIONS, OutputField, RowsToArrow
    from airflow_tablestore.spark.stream.output import ChangeOutput

    if IMPLEMENTATION != "c":
        print("the compiled modules are not in use: nothing to compare", file=sys.stderr)
        return 2
    rows = make_rows(count)
    with_seq = [Row(r.primary_key, r.columns, False, SequenceInfo(0, (BASE_TS + i) * 1000, i))
                for i, r in enumerate(rows)]
    records = Records.from_bodies([encode_row(r) for r in with_seq], [1] * count)
    answer_message: Any = ots_tunnel_pb2.ReadRecordsResponse(next_token="t")  # type: ignore[attr-defined]
    for body in records.bodies:
        answer_message.records.add(action_type=1, record=body)
    answer = answer_message.SerializeToString()  # what ReadRecords answers: split in C, or parsed by protobuf
    getrange = encode_rows(rows)
    kinds = {"amount": ColumnType.INTEGER, "city": ColumnType.STRING, "comment": ColumnType.STRING,
             "count": ColumnType.INTEGER, "deleted": ColumnType.BOOLEAN, "digest": ColumnType.BINARY,
             "price": ColumnType.DOUBLE, "ratio": ColumnType.DOUBLE, "status": ColumnType.STRING,
             "updated_ms": ColumnType.INTEGER}
    arrow_of = {ColumnType.INTEGER: pa.int64(), ColumnType.DOUBLE: pa.float64(), ColumnType.BOOLEAN: pa.bool_(),
                ColumnType.STRING: pa.string(), ColumnType.BINARY: pa.binary()}
    fields = [OutputField("id", KEY, ColumnType.INTEGER, 0), OutputField("tenant", KEY, ColumnType.STRING, 1)]
    fields += [OutputField(name, CELL, kind) for name, kind in kinds.items()]
    converter = RowsToArrow(fields, pa.schema([pa.field(f.name, arrow_of[f.type]) for f in fields if f.type]),
                            failfast=True)
    # every attribute column as list<struct<timestamp, value>> (newest first), 3 versions a column
    versioned_page = encode_rows([Row(r.primary_key, tuple(Column(c.name, c.value, (c.timestamp or 0) - k)
                                                            for c in r.columns for k in range(3))) for r in rows])
    versioned = RowsToArrow(
        [*fields[:2], *(OutputField(name, VERSIONS, kind) for name, kind in kinds.items())],
        pa.schema([pa.field("id", pa.int64()), pa.field("tenant", pa.string()),
                   *(pa.field(name, pa.list_(pa.field("element", pa.struct([
                       pa.field("timestamp", pa.int64(), False), pa.field("value", arrow_of[kind])]), False)))
                     for name, kind in kinds.items())]), failfast=True)
    # the streaming source's user schema: the key, each column's newest PUT value, the action last
    stream = ChangeOutput(pa.schema([*converter.schema, pa.field("_action", pa.string())]), converter, len(fields))
    by_objects = RowsToArrow(converter.fields, converter.schema, failfast=True)
    by_objects.changes_compiled = lambda records, with_action=False: None  # type: ignore[method-assign]
    stream_by_objects = ChangeOutput(stream.schema, by_objects, len(fields))

    def fresh() -> Records:  # nothing decoded yet: the answer split (TunnelClient.read_records)
        split = split_read_records(answer)
        assert split is not None
        return split[0]

    def log_objects() -> pa.Table:  # TunnelClient.read_records, then the compiled builder of record objects
        parsed = ots_tunnel_pb2.ReadRecordsResponse.FromString(answer)  # type: ignore[attr-defined]
        return objects_to_arrow_compiled(decode_records(parsed.records), "ch", "chunk")

    def log_python() -> pa.Table:
        return objects_to_arrow_python(_python_records(records), "ch", "chunk")

    def stream_objects() -> list[pa.RecordBatch]:  # the answer parsed by protobuf, decoded, then the records' rows
        parsed = ots_tunnel_pb2.ReadRecordsResponse.FromString(answer)  # type: ignore[attr-defined]
        return list(stream_by_objects.batches(Records.from_messages(parsed.records), "ch", "chunk", 0))

    timings = {
        "log straight": _best(lambda: records_to_arrow_compiled(fresh(), "ch", "chunk"), repeat),
        "log objects": _best(log_objects, repeat),
        "log python": _best(log_python, max(1, repeat // 2)),
        "scan": _best(lambda: fresh().scan(BASE_TS * 1000 * 2), repeat),
        "split c": _best(fresh, repeat),
        "split protobuf": _best(lambda: Records.from_messages(
            ots_tunnel_pb2.ReadRecordsResponse.FromString(answer).records), repeat),  # type: ignore[attr-defined]
        "flat straight": _best(lambda: converter.page_compiled(Rows(getrange)), repeat),
        "flat objects": _best(lambda: converter.batch(decode_rows(getrange)), repeat),
        "flat python": _best(lambda: converter.batch_python(decode_rows_python(getrange)), max(1, repeat // 2)),
        "versions straight": _best(lambda: versioned.page_compiled(Rows(versioned_page)), repeat),
        "versions objects": _best(lambda: versioned.batch(decode_rows(versioned_page)), repeat),
        "versions before": _best(lambda: versioned.batch_python(decode_rows(versioned_page)), repeat),
        "versions python": _best(lambda: versioned.batch_python(decode_rows_python(versioned_page)),
                                 max(1, repeat // 2)),
        "stream straight": _best(lambda: list(stream.batches(fresh(), "ch", "chunk", 0)), repeat),
        "stream objects": _best(stream_objects, repeat),
    }
    assert timings["log straight"][1].equals(timings["log objects"][1]), "change logs differ"
    assert timings["log straight"][1].equals(timings["log python"][1]), "change logs differ (Python)"
    assert timings["flat straight"][1].equals(timings["flat objects"][1]), "flat batches differ"
    assert timings["flat straight"][1].equals(timings["flat python"][1]), "flat batches differ (Python)"
    for other in ("objects", "before", "python"):
        assert timings["versions straight"][1].equals(timings[f"versions {other}"][1]), f"versions differ ({other})"
    straight_batches, object_batches = timings["stream straight"][1], timings["stream objects"][1]
    assert len(straight_batches) == len(object_batches) and all(
        a.equals(b) for a, b in zip(straight_batches, object_batches, strict=True)), "stream batches differ"
    print(f"{count:,} records / rows (2 key + 10 attribute columns), best of {repeat}, CPU seconds:")
    for what in ("log", "flat"):
        straight, objects, python = (timings[f"{what} {k}"][0] for k in ("straight", "objects", "python"))
        print(f"  {'change log' if what == 'log' else 'flat batch'}: straight {straight:.4f} s, decode-then-build "
              f"{objects:.4f} s ({objects / straight:.2f}x), pure Python {python:.4f} s ({python / straight:.2f}x)")
    print(f"  scan of the sequence timestamps (SpanRead's cut, every record checked): {timings['scan'][0]:.4f} s")
    split, parsed = timings["split c"][0], timings["split protobuf"][0]
    print(f"  the answer into record bodies: in C {split:.4f} s, protobuf and one bytes per record {parsed:.4f} s "
          f"({parsed / split:.2f}x)")
    straight, objects, before, python = (timings[f"versions {k}"][0] for k in ("straight", "objects", "before",
                                                                                 "python"))
    print(f"  versioned flat batch (3 versions a column): straight {straight:.4f} s, decode-then-build {objects:.4f} s "
          f"({objects / straight:.2f}x), decode then the Python builder (before) {before:.4f} s "
          f"({before / straight:.2f}x), pure Python {python:.4f} s ({python / straight:.2f}x)")
    straight, objects = timings["stream straight"][0], timings["stream objects"][0]
    print(f"  streaming user schema (answer -> batch): straight {straight:.4f} s, decode-then-build {objects:.4f} s "
          f"({objects / straight:.2f}x)")
    return 0


def _python_records(records: Any) -> list[Any]:
    """The records decoded by the pure-Python decoder (the path without compiled modules)."""
    from airflow_tablestore.client.model import ActionType, Record

    return [Record(ActionType(action), row.primary_key, row.columns, row.sequence)
            for action, row in zip(records.action_types(), map(decode_record_python, records.bodies), strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--arrow", action="store_true", help="bytes -> Arrow straight vs decode-then-build only")
    args = parser.parse_args(argv)
    if args.arrow:
        return arrow_straight(args.rows, args.repeat)

    print(f"building {args.rows} rows ...", flush=True)
    rows = make_rows(args.rows)
    getrange = encode_rows(rows)
    with_seq = [Row(r.primary_key, r.columns, False, SequenceInfo(0, (BASE_TS + i) * 1000, 0))
                for i, r in enumerate(rows)]
    records = [encode_row(r) for r in with_seq]
    plain_records = [encode_row(r) for r in rows]
    large_rows = make_large_rows(max(1, args.rows // 10))
    large = encode_rows(large_rows)

    # Ours first, then the SDK, then ours again; best of all repetitions. "c" is the compiled decoder (when it is
    # built and in use), "py" the pure-Python one; encoding is pure Python in both.
    compiled = IMPLEMENTATION == "c"
    paths: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = {
        "py": (decode_rows_python, decode_record_list_python, decode_record_python),
    }
    if compiled:
        paths["c"] = (decode_rows, decode_record_list, decode_record)

    def ours() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path, (rows_fn, list_fn, record_fn) in paths.items():
            t_decode, decoded = _best(lambda: rows_fn(getrange), args.repeat)  # noqa: B023 - called at once
            t_records, decoded_records = _best(lambda: list_fn(records), args.repeat)  # noqa: B023
            t_single, single_records = _best(lambda: [record_fn(r) for r in records], args.repeat)  # noqa: B023
            t_large, decoded_large = _best(lambda: rows_fn(large), args.repeat)  # noqa: B023
            assert decoded == rows and decoded_records == with_seq and single_records == with_seq, path
            assert decoded_large == large_rows, path
            out.update({f"{path}_decode_s": t_decode, f"{path}_records_s": t_records,
                        f"{path}_single_s": t_single, f"{path}_large_s": t_large})
        t_encode, encoded = _best(lambda: [encode_row(r) for r in rows], args.repeat)
        out.update({"py_encode_s": t_encode, "encoded": encoded})
        return out

    print(f"timing ours ({'compiled and pure Python' if compiled else 'pure Python only: not compiled'}) ...",
          flush=True)
    first = ours()
    print(f"timing the SDK ({SDK_REQUIREMENT}, pure Python, in .oracle-venv) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "getrange.bin").write_bytes(getrange)
        Path(tmp, "large.bin").write_bytes(large)
        Path(tmp, "plain_records.json").write_text(json.dumps([r.hex() for r in plain_records]))
        Path(tmp, "rows.json").write_text(json.dumps(_spec(rows)))
        script = Path(tmp, "sdk_side.py")
        script.write_text(_SDK_SCRIPT)
        try:
            done = run_in_oracle(script, [tmp, str(args.repeat)], timeout=3600)
        except OracleUnavailable as exc:
            print(f"cannot run the baseline: {exc}", file=sys.stderr)
            return 2
    if done.returncode != 0:
        print(done.stdout, done.stderr, file=sys.stderr)
        return 1
    sdk = json.loads(done.stdout.strip().splitlines()[-1])
    print("timing ours again ...", flush=True)
    second = ours()
    mine = {k: min(first[k], second[k]) for k in first if k.endswith("_s")}

    # Same answers on both sides, or the numbers mean nothing.
    assert sdk["decode_digest"] == _digest(rows), "SDK decoded the GetRange buffer differently"
    assert sdk["records_digest"] == _digest(rows), "SDK decoded the records differently"
    assert sdk["large_digest"] == _digest(large_rows), "SDK decoded the large rows differently"
    encoded_digest = hashlib.sha256(b"".join(first["encoded"])).hexdigest()
    assert sdk["encode_digest"] == encoded_digest, "SDK encoded PutRow rows differently"

    n = args.rows
    cells = sum(len(r.primary_key) + len(r.columns) for r in rows[:1])
    print()
    print(f"{n} rows x {cells} cells, GetRange buffer {len(getrange) / 1e6:.2f} MB, best of {args.repeat} "
          f"(CPU time), Python {sys.version.split()[0]}")
    print()
    native = "native_decode_s" in sdk
    if native:
        assert sdk["native_decode_digest"] == _digest(rows), "SDK's C parser decoded the GetRange buffer differently"
        assert sdk["native_records_digest"] == _digest(rows), "SDK's C parser decoded the records differently"
        assert sdk["native_large_digest"] == _digest(large_rows), "SDK's C parser decoded the large rows differently"
    else:
        print("the SDK's C parser (tablestore.native) does not load here: its columns stay empty", file=sys.stderr)

    def rate(count: int, seconds: float | None) -> str:
        return f"{count / seconds:,.0f}" if seconds else "-"

    def ratio(count: int, ours_s: float | None, theirs_s: float | None) -> str:
        return f"{theirs_s / ours_s:.2f}x" if ours_s and theirs_s else "-"

    n_large = len(large_rows)
    print("| workload | ours C | ours Python | SDK C (`tablestore.native`) | SDK Python | ours C / SDK C "
          "| ours Python / SDK Python |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, key, count, sdk_key in (
        ("decode GetRange response", "decode", n, "decode"),
        ("decode tunnel records, batch (`decode_record_list`)", "records", n, "records"),
        ("decode tunnel records, one `decode_record` call each", "single", n, "records"),
        (f"decode {n_large} rows with a 4 KB string + a 4 KB binary value ({len(large) / 1e6:.1f} MB)", "large",
         n_large, "large"),
        ("encode PutRow rows (byte-identical output; no compiled encoder)", "encode", n, "encode"),
    ):
        c_s, py_s = mine.get(f"c_{key}_s"), mine.get(f"py_{key}_s")
        sdk_c, sdk_py = sdk.get(f"native_{sdk_key}_s"), sdk.get(f"{sdk_key}_s")
        print(f"| {label} | {rate(count, c_s)} | {rate(count, py_s)} | {rate(count, sdk_c)} | {rate(count, sdk_py)} "
              f"| {ratio(count, c_s, sdk_c)} | {ratio(count, py_s, sdk_py)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
