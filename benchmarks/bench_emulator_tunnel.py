"""Emulator read throughput over HTTP: tunnel ReadRecords vs GetRange, and serving capacity vs one client.

Run: ``.venv/bin/python -m benchmarks.bench_emulator_tunnel [--rows 20000] [--batch 1000] [--repeat 5]``
or ``... --capacity [--loaders 3] [--seconds 4]``.

One emulator process (``--max-read-records BATCH``, one BaseData channel for the whole table) with ``rows``
rows of one 100-byte column.

Default mode, timed, single client, sequential calls, raw signed protobuf over HTTP:

* baseline: GetRange over the whole table in pages of ``batch`` rows;
* BaseData tunnel: ReadRecords on the snapshot channel until "finished";
* Stream tunnel (EARLIEST): ReadRecords over every stream partition to the head.

Interleaved, best of ``repeat``. All three decode every row with the emulator's PlainBuffer codec. Each drain
is checked to deliver exactly ``rows`` records before numbers are printed.

``--capacity`` compares, for the same three workloads, what the emulator *serves* with what *one client
process consumes*:

* serves: ``loaders`` processes, each on its own keep-alive connection, replay the requests of a whole drain
  (pre-signed; the same token gives the same records) for ``seconds`` and count records from the protobuf
  envelope only (GetRange: the page's row count, known from the client drain), decoding no row;
* one client: this process drains with the client library (``TunnelClient.read_records``,
  ``TableClient.get_range``: full decode), best of ``repeat``;
* decode alone: the client library's decode of the same responses, pre-fetched (the most one client process
  could consume from an infinitely fast server).
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import time
from typing import Any

from airflow_tablestore.emulator import auth
from airflow_tablestore.emulator.codec.decode import decode_row, decode_rows
from airflow_tablestore.emulator.codec.encode import encode_primary_key
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.emulator_http import Http, table_pb2, tunnel_pb2
from testing.emulator_tunnel import SimWorker

Step = tuple[str, bytes, int]
"""One request of a drain: wire path, serialized request, records (rows) its answer carries."""


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


def _sequential(args: argparse.Namespace, emu: EmulatorProcess, http: Http, table: str,
                workers: list[SimWorker]) -> None:
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


# -- capacity mode ------------------------------------------------------------------------------------------
def _tunnel_steps(w: SimWorker) -> tuple[list[Step], list[Any]]:
    """The ReadRecords requests of a whole drain of ``w``'s channels, and their answers."""
    steps: list[Step] = []
    answers: list[Any] = []
    for cid in sorted(w.open_channels()):
        token, _ = w.tunnel.get_checkpoint(w.tunnel_id, w.client_id, cid)
        while token != "finished":
            req = tunnel_pb2.ReadRecordsRequest(tunnel_id=w.tunnel_id, client_id=w.client_id, channel_id=cid,
                                                token=token)
            resp = w.tunnel.read(w.tunnel_id, w.client_id, cid, token)
            steps.append(("/tunnel/readrecords", req.SerializeToString(), len(resp.records)))
            answers.append(resp)
            if not resp.records and resp.next_token != "finished" and not resp.may_more_record:
                break  # a stream channel at the head of an open partition
            token = resp.next_token
    return steps, answers


def _range_steps(http: Http, table: str, batch: int) -> tuple[list[Step], list[Any]]:
    start = encode_primary_key([("pk", INF_MIN)])
    end = encode_primary_key([("pk", INF_MAX)])
    steps: list[Step] = []
    answers: list[Any] = []
    while True:
        req = table_pb2.GetRangeRequest(table_name=table, direction=0, max_versions=1, limit=batch,
                                        inclusive_start_primary_key=start, exclusive_end_primary_key=end)
        resp: Any = http.call("/GetRange", req, table_pb2.GetRangeResponse)
        steps.append(("/GetRange", req.SerializeToString(), len(decode_rows(resp.rows)) if resp.rows else 0))
        answers.append(resp)
        if not resp.next_start_primary_key:
            return steps, answers
        start = resp.next_start_primary_key


def _process_cpu(pid: int) -> float:
    """CPU-seconds (user + system) used so far by process ``pid``, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _signed(creds: dict[str, str], uri: str, body: bytes) -> dict[str, str]:
    headers = {
        "x-ots-date": auth.format_date(time.time()),
        "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": creds["access_key_id"],
        "x-ots-instancename": creds["instance"],
        "x-ots-contentmd5": auth.content_md5(body),
    }
    headers["x-ots-signature"] = auth.sign_v2(creds["access_key_secret"], uri, headers)
    headers["Content-Type"] = "application/x-protobuf"
    return headers


def _load(host: str, port: int, creds: dict[str, str], steps: list[Step], tunnel: bool, go: Any,
          seconds: float, out: Any) -> None:
    """One loader process: replay ``steps`` for ``seconds`` after ``go``; put (records, elapsed) on ``out``."""
    conn = http.client.HTTPConnection(host, port, timeout=120)
    signed = [(uri, body, _signed(creds, uri, body), n) for uri, body, n in steps]  # valid for 15 minutes
    go.wait()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    records = 0
    now = t0
    while now < deadline:
        for uri, body, headers, n in signed:
            conn.request("POST", uri, body, headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{uri}: HTTP {resp.status}")
            # Count from the envelope only: no row is decoded (a GetRange page's count is known).
            records += len(tunnel_pb2.ReadRecordsResponse.FromString(data).records) if tunnel else n
            now = time.perf_counter()
            if now >= deadline:
                break
    conn.close()
    out.put((records, now - t0))


def _serve_rate(emu: EmulatorProcess, steps: list[Step], tunnel: bool, loaders: int, seconds: float) -> float:
    host, port = emu.endpoint.split("//", 1)[1].rsplit(":", 1)
    creds = {"access_key_id": emu.access_key_id, "access_key_secret": emu.access_key_secret,
             "instance": emu.instance}
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_load, args=(host, int(port), creds, steps, tunnel, go, seconds, out))
             for _ in range(loaders)]
    for p in procs:
        p.start()
    time.sleep(1.5)  # let them import and sign
    go.set()
    got = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    return sum(n for n, _ in got) / max(dt for _, dt in got)


def _capacity(args: argparse.Namespace, emu: EmulatorProcess, http: Http, table: str,
              workers: list[SimWorker]) -> None:
    from airflow_tablestore.client import INF_MAX as C_MAX
    from airflow_tablestore.client import INF_MIN as C_MIN
    from airflow_tablestore.client import TableClient, TunnelClient
    from airflow_tablestore.client.plainbuffer.decode import decode_rows as client_decode_rows
    from airflow_tablestore.client.plainbuffer.implementation import IMPLEMENTATION
    from airflow_tablestore.client.records import decode_records

    tunnel_client = TunnelClient(**emu.client_kwargs)
    table_client = TableClient(**emu.client_kwargs)

    def client_tunnel(w: SimWorker) -> int:
        n = 0
        for cid in sorted(w.open_channels()):
            token, _ = tunnel_client.get_checkpoint(w.tunnel_id, w.client_id, cid)
            while token != "finished":
                res = tunnel_client.read_records(w.tunnel_id, w.client_id, cid, token)
                n += len(res.records.decode())
                if not res.records and not res.may_more and res.next_token != "finished":
                    break
                token = res.next_token
        return n

    def client_range() -> int:
        n = 0
        start: Any = [("pk", C_MIN)]
        while start is not None:
            rows, start = table_client.get_range(table, start, [("pk", C_MAX)], limit=args.batch)
            n += len(rows)
        return n

    plans = {
        "BaseData ReadRecords": (_tunnel_steps(workers[0]), True, lambda: client_tunnel(workers[0])),
        "Stream ReadRecords": (_tunnel_steps(workers[1]), True, lambda: client_tunnel(workers[1])),
        "GetRange": (_range_steps(http, table, args.batch), False, client_range),
    }
    client: dict[str, float] = {}
    decode: dict[str, float] = {}
    cpu_client: dict[str, float] = {}
    cpu_server: dict[str, float] = {}
    cold: dict[str, tuple[float, float]] = {}
    warm_records: dict[str, int] = {}
    assert emu.process is not None
    for _ in range(args.repeat):  # interleaved, best of `repeat`
        for name, ((steps, answers), tunnel, fn) in plans.items():
            assert sum(n for _, _, n in steps) == args.rows, (name, steps)
            s0 = _process_cpu(emu.process.pid)
            c0 = time.process_time()
            t0 = time.perf_counter()
            n = fn()
            dt = time.perf_counter() - t0
            c1 = time.process_time()
            s1 = _process_cpu(emu.process.pid)
            assert n == args.rows, (name, n)
            client[name] = max(client.get(name, 0.0), n / dt)
            if name not in cold:  # the first drain: the emulator's read cache is built during it
                cold[name] = ((c1 - c0) / n * 1e5, (s1 - s0) / n * 1e5)
                continue
            # the others summed: /proc counts in 10 ms ticks, a few per drain
            cpu_client[name] = cpu_client.get(name, 0.0) + (c1 - c0)
            cpu_server[name] = cpu_server.get(name, 0.0) + (s1 - s0)
            warm_records[name] = warm_records.get(name, 0) + n
            t0 = time.perf_counter()
            if tunnel:
                n = sum(len(decode_records(a.records)) for a in answers)
            else:
                n = sum(len(client_decode_rows(a.rows)) for a in answers if a.rows)
            dt = time.perf_counter() - t0
            assert n == args.rows, (name, n)
            decode[name] = max(decode.get(name, 0.0), n / dt)
    served = {name: _serve_rate(emu, steps, tunnel, args.loaders, args.seconds)
              for name, ((steps, _), tunnel, _) in plans.items()}
    tunnel_client.close()
    table_client.close()
    print(f"rows={args.rows} batch={args.batch} client best of {args.repeat}, {args.loaders} loader processes "
          f"for {args.seconds:g} s each, client PlainBuffer decoder: {IMPLEMENTATION}")
    print(f"{'workload':22s} {'served rec/s':>13s} {'1 client rec/s':>15s} {'ratio':>6s} "
          f"{'decode alone rec/s':>19s} {'ratio':>6s}")
    for name in plans:
        print(f"{name:22s} {served[name]:13.0f} {client[name]:15.0f} {served[name] / client[name]:6.2f} "
              f"{decode[name]:19.0f} {served[name] / decode[name]:6.2f}")
    print(f"CPU-seconds per 100k records on each side of the same drains: the first drain, then the other "
          f"{args.repeat - 1} together (warm: the emulator's read cache built); emulator read "
          f"cache {args.read_cache_mb if args.read_cache_mb is not None else 'default'} MB; client/emulator = how "
          "many such clients one emulator core serves")
    print(f"{'workload':22s} {'1st: client':>12s} {'emulator':>9s} {'ratio':>6s} {'warm client':>12s} "
          f"{'emulator':>9s} {'ratio':>6s}")
    for name in plans:
        cc, cs = cold[name]
        wc, ws = (cpu_client[name] / warm_records[name] * 1e5, cpu_server[name] / warm_records[name] * 1e5)
        print(f"{name:22s} {cc:12.3f} {cs:9.3f} {cc / max(cs, 1e-9):6.2f} {wc:12.3f} {ws:9.3f} "
              f"{wc / max(ws, 1e-9):6.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--capacity", action="store_true", help="served vs consumed by one client (see above)")
    ap.add_argument("--loaders", type=int, default=3, help="--capacity: concurrent raw-HTTP loader processes")
    ap.add_argument("--seconds", type=float, default=4.0, help="--capacity: how long the loaders run")
    ap.add_argument("--read-cache-mb", type=int, default=None, help="the emulator's --read-cache-mb (0: off)")
    args = ap.parse_args()
    extra = ["--max-read-records", str(args.batch), "--base-channel-rows", str(args.rows * 2),
             "--range-page-rows", str(args.batch), "--log-level", "WARNING"]
    if args.read_cache_mb is not None:
        extra += ["--read-cache-mb", str(args.read_cache_mb)]
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
        if args.capacity:
            _capacity(args, emu, http, table, workers)
        else:
            _sequential(args, emu, http, table, workers)


if __name__ == "__main__":
    main()
