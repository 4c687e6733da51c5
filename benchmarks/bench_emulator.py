"""Emulator throughput/latency benchmark over real HTTP (single client, keep-alive session).

Measures PutRow latency (p50/p99), BatchWriteRow rows/s (200-row batches) and GetRange rows/s, and as the
baseline the same number of signed round trips to ListTable (a trivial endpoint), so the ratios show the
emulator's per-operation overhead on top of HTTP + signing.

    .venv/bin/python -m benchmarks.bench_emulator [--puts 2000] [--rows 50000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from airflow_tablestore.emulator.codec.decode import decode_rows
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_table_pb2
from testing.emulator_http import Http

pb: Any = ots_table_pb2


class Signer:
    """Signed protobuf POSTs to one emulator over a keep-alive session (the emulator tests' raw-HTTP helper)."""

    def __init__(self, emu: EmulatorProcess) -> None:
        self.http = Http(emu)

    def post(self, api: str, body: bytes) -> bytes:
        resp = self.http.post_raw(f"/{api}", body)
        if resp.status_code != 200:
            raise RuntimeError(f"{api}: HTTP {resp.status_code}: {pb.Error.FromString(resp.content)}")
        return bytes(resp.content)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(puts: int, rows: int) -> dict[str, float]:
    with EmulatorProcess(extra_args=["--log-level", "WARNING"]) as emu:
        s = Signer(emu)
        s.http.create_table("bench", stream=True, expiration_hours=24)

        for _ in range(50):  # warm up connections and caches
            s.post("ListTable", b"")
        base = []
        for _ in range(puts):
            t0 = time.perf_counter()
            s.post("ListTable", b"")
            base.append(time.perf_counter() - t0)

        lat = []
        for i in range(puts):
            r = pb.PutRowRequest(table_name="bench", row=encode_row(
                [("pk", 10_000_000 + i)], [("a", "x" * 100, None, None), ("b", i, None, None)]))
            r.condition.row_existence = 0
            body = r.SerializeToString()
            t0 = time.perf_counter()
            s.post("PutRow", body)
            lat.append(time.perf_counter() - t0)

        batches = []
        for start in range(0, rows, 200):
            b = pb.BatchWriteRowRequest()
            t = b.tables.add(table_name="bench")
            for i in range(start, min(rows, start + 200)):
                row = t.rows.add(type=pb.PUT, row_change=encode_row(
                    [("pk", i)], [("a", "x" * 100, None, None), ("b", i, None, None)]))
                row.condition.row_existence = 0
            batches.append(b.SerializeToString())
        t0 = time.perf_counter()
        for body in batches:
            s.post("BatchWriteRow", body)
        batch_s = time.perf_counter() - t0
        base_batch_s = sum(base[: len(batches)]) * (len(batches) / min(len(batches), len(base)))

        got = 0
        pages = 0
        start_pk = encode_primary_key([("pk", INF_MIN)])
        end_pk = encode_primary_key([("pk", INF_MAX)])
        t0 = time.perf_counter()
        while True:
            g = pb.GetRangeRequest(table_name="bench", direction=0, max_versions=1,
                                   inclusive_start_primary_key=start_pk, exclusive_end_primary_key=end_pk)
            resp = pb.GetRangeResponse.FromString(s.post("GetRange", g.SerializeToString()))
            got += len(decode_rows(resp.rows)) if resp.rows else 0
            pages += 1
            if not resp.HasField("next_start_primary_key"):
                break
            start_pk = resp.next_start_primary_key
        range_s = time.perf_counter() - t0
        base_range_s = statistics.mean(base) * pages

    return {
        "baseline_p50_ms": pct(base, 0.5) * 1000,
        "baseline_p99_ms": pct(base, 0.99) * 1000,
        "put_p50_ms": pct(lat, 0.5) * 1000,
        "put_p99_ms": pct(lat, 0.99) * 1000,
        "put_ratio_p50": pct(lat, 0.5) / pct(base, 0.5),
        "batch_rows_per_s": rows / batch_s,
        "batch_ms_per_request": batch_s / len(batches) * 1000,
        "batch_ratio": batch_s / base_batch_s,
        "range_rows": got,
        "range_rows_per_s": got / range_s,
        "range_pages": pages,
        "range_ratio": range_s / base_range_s,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--puts", type=int, default=2000)
    p.add_argument("--rows", type=int, default=50_000)
    args = p.parse_args()
    r = run(args.puts, args.rows)
    print(f"baseline ListTable round trip: p50 {r['baseline_p50_ms']:.2f} ms, p99 {r['baseline_p99_ms']:.2f} ms")
    print(f"PutRow ({args.puts}x): p50 {r['put_p50_ms']:.2f} ms, p99 {r['put_p99_ms']:.2f} ms, "
          f"p50 ratio vs baseline {r['put_ratio_p50']:.2f}x")
    print(f"BatchWriteRow (200-row batches, {args.rows} rows): {r['batch_rows_per_s']:.0f} rows/s, "
          f"{r['batch_ms_per_request']:.1f} ms/request, {r['batch_ratio']:.1f}x the baseline round trips")
    print(f"GetRange ({r['range_rows']:.0f} rows, {r['range_pages']:.0f} pages): {r['range_rows_per_s']:.0f} rows/s, "
          f"{r['range_ratio']:.1f}x the baseline round trips")


if __name__ == "__main__":
    main()
