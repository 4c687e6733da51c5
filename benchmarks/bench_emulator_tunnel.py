"""Emulator tunnel read throughput over HTTP vs a GetRange scan of the same rows (baseline, same run).

Run: ``.venv/bin/python -m benchmarks.bench_emulator_tunnel [--rows 20000] [--batch 1000] [--repeat 5]``

One emulator process (``--max-read-records BATCH``, one BaseData channel for the whole table) with ``rows``
rows of one 100-byte column. Timed, single client, sequential calls, raw signed protobuf over HTTP:

* baseline: GetRange over the whole table in pages of ``batch`` rows;
* BaseData tunnel: ReadRecords on the snapshot channel until "finished";
* Stream tunnel (EARLIEST): ReadRecords over every stream partition to the head.

Interleaved, best of ``repeat``. All three decode every row with the emulator's PlainBuffer codec. Each drain
is checked to deliver exactly ``rows`` records before numbers are printed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from airflow_tablestore.emulator.codec.decode import decode_row, decode_rows
from airflow_tablestore.emulator.codec.encode import encode_primary_key
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import use_emulator_test_helpers

use_emulator_test_helpers()
from tunnel_emu_helpers import SimWorker  # noqa: E402
from tunnel_emu_http import Http, table_pb2  # noqa: E402


def _scan(http: Http, table: str, batch: int) -> int:
    start = encode_primary_key([("pk", INF_MIN)])
    end = encode_primary_key([("pk", INF_MAX)])
    n = 0
    while True:
        req = table_pb2.GetRangeRequest(table_name=table, direction=0, max_versions=1, limit=batch,
                                        inclusive_start_primary_key=start, exclusive_end_primary_key=end)
        resp: Any = http.call("/GetRange", req, table_pb2.GetRangeResponse)
        n += len(decode_rows(resp.rows)) if resp.rows else 0
        if not resp.next_start_primary_key:
            return n
        start = resp.next_start_primary_key


def _drain(w: SimWorker) -> int:
    """Read every channel from its (never advanced) checkpoint to the end: repeatable."""
    n = 0
    for cid in sorted(w.open_channels()):
        records, _ = w.tunnel.drain(w.tunnel_id, w.client_id, cid, checkpoint=False)
        n += sum(1 for r in records if decode_row(r[1]))  # decode, like the scan
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    extra = ["--max-read-records", str(args.batch), "--base-channel-rows", str(args.rows * 2),
             "--range-page-rows", str(args.batch)]
    with EmulatorProcess(extra_args=extra) as emu:
        http = Http(emu)
        table = http.create_table("bench")
        http.write_many(table, {i: "x" * 100 for i in range(args.rows)})
        t = http.tunnel()
        base_id = t.create(table, "base", 1)
        stream_id = t.create(table, "stream", 2, flag=1)

        workers = [SimWorker(t, tid, "bench") for tid in (base_id, stream_id)]
        for w in workers:
            w.beat()
        results: dict[str, float] = {}
        for _ in range(args.repeat):  # interleaved, best of `repeat` (the machine may be shared)
            for name, fn in (("GetRange scan (baseline)", lambda: _scan(http, table, args.batch)),
                             ("tunnel BaseData ReadRecords", lambda: _drain(workers[0])),
                             ("tunnel Stream ReadRecords", lambda: _drain(workers[1]))):
                t0 = time.perf_counter()
                n = fn()
                dt = time.perf_counter() - t0
                assert n == args.rows, (name, n)
                results[name] = max(results.get(name, 0.0), n / dt)
        base = results["GetRange scan (baseline)"]
        print(f"rows={args.rows} batch={args.batch} best of {args.repeat}")
        for name, rate in results.items():
            print(f"{name:32s} {rate:10.0f} rows/s   ratio vs baseline {rate / base:5.2f}")


if __name__ == "__main__":
    main()
