"""PlainBuffer codec benchmark: ours vs the official SDK's pure-Python codec, on identical bytes.

Run: ``.venv/bin/python -m benchmarks.bench_plainbuffer [--rows 20000] [--repeat 5]``

Four workloads, each timed best-of-``repeat`` in this process and in the oracle venv back to back (CPU time
of the process, ``time.process_time``, so that other load on a shared machine does not skew the ratio):

* decode a GetRange response: one header + ``rows`` rows of 2 PK + 10 attribute columns with timestamps;
* decode tunnel records: ``rows`` single-row messages with the sequence-info extension (the SDK has no tunnel
  support and cannot parse the extension, so its baseline reads the same rows without it);
* encode PutRow rows (the SDK's ``PlainBufferBuilder.serialize_for_put_row``); the bytes must be identical;
* decode ``rows / 10`` rows carrying a 4 KB string and a 4 KB binary value (long-value CRC path).

Results are checked for equality across both sides (a digest of the decoded values, a digest of the
encoded bytes) before any number is printed. The SDK's optional C parser (``tablestore.native``) is timed too,
for information only.
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
from airflow_tablestore.client.plainbuffer.decode import decode_record, decode_record_list, decode_rows
from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
from benchmarks.oracle import SDK_REQUIREMENT, OracleUnavailable, run_in_oracle

BASE_TS = 1_700_000_000_000

# Runs inside the oracle venv. argv: data directory, repeat. Prints one JSON object.
_SDK_SCRIPT = r'''
import hashlib, json, logging, sys, time
logging.disable(logging.CRITICAL)
from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder
from tablestore.plainbuffer.plain_buffer_coded_stream import PlainBufferCodedInputStream
from tablestore.plainbuffer.plain_buffer_stream import PlainBufferInputStream
try:
    from tablestore.native import NATIVE_AVAILABLE, parse_multiple_rows
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
    result["native_rows"] = len(native_rows)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    print(f"building {args.rows} rows ...", flush=True)
    rows = make_rows(args.rows)
    getrange = encode_rows(rows)
    with_seq = [Row(r.primary_key, r.columns, False, SequenceInfo(0, (BASE_TS + i) * 1000, 0))
                for i, r in enumerate(rows)]
    records = [encode_row(r) for r in with_seq]
    plain_records = [encode_row(r) for r in rows]
    large_rows = make_large_rows(max(1, args.rows // 10))
    large = encode_rows(large_rows)

    # Ours first, then the SDK, then ours again; best of all repetitions.
    def ours() -> dict[str, Any]:
        t_decode, decoded = _best(lambda: decode_rows(getrange), args.repeat)
        t_records, decoded_records = _best(lambda: decode_record_list(records), args.repeat)
        t_single, single_records = _best(lambda: [decode_record(r) for r in records], args.repeat)
        t_encode, encoded = _best(lambda: [encode_row(r) for r in rows], args.repeat)
        t_large, decoded_large = _best(lambda: decode_rows(large), args.repeat)
        assert decoded == rows and decoded_records == with_seq and single_records == with_seq
        assert decoded_large == large_rows
        return {
            "large_s": t_large,
            "decode_s": t_decode,
            "records_s": t_records,
            "single_s": t_single,
            "encode_s": t_encode,
            "encoded": encoded,
        }

    print("timing ours ...", flush=True)
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
    mine = {k: min(first[k], second[k]) for k in ("decode_s", "records_s", "single_s", "encode_s", "large_s")}

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
    print("| workload | ours rows/s | SDK pure-Python rows/s | ours / SDK |")
    print("|---|---:|---:|---:|")
    for label, key in (
        ("decode GetRange response", "decode_s"),
        ("decode tunnel records, batch (`decode_record_list`)", "records_s"),
        ("decode tunnel records, one `decode_record` call each", "single_s"),
        ("encode PutRow rows (byte-identical output)", "encode_s"),
    ):
        ours_rate, sdk_rate = n / mine[key], n / sdk["records_s" if key == "single_s" else key]
        print(f"| {label} | {ours_rate:,.0f} | {sdk_rate:,.0f} | {ours_rate / sdk_rate:.1f}x |")
    n_large = len(large_rows)
    ours_rate, sdk_rate = n_large / mine["large_s"], n_large / sdk["large_s"]
    print(f"| decode {n_large} rows with a 4 KB string + a 4 KB binary value "
          f"({len(large) / 1e6:.1f} MB) | {ours_rate:,.0f} | {sdk_rate:,.0f} | {ours_rate / sdk_rate:.1f}x |")
    if "native_decode_s" in sdk:
        native_rate = n / sdk["native_decode_s"]
        print(f"\nFor information: the SDK's optional C parser (tablestore.native) decodes {native_rate:,.0f} "
              f"rows/s; ours / C = {n / mine['decode_s'] / native_rate:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
