"""The stream log (record contents, order, partitions, split, retention) and snapshots under concurrent writes."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from emu_wire import Wire, create_table, delete, pb, put, update

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.codec.format import HEADER, OP_DELETE_ALL, OP_INCREMENT, PBRow
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.keys import encode_key
from airflow_tablestore.emulator.store.model import load_columns
from airflow_tablestore.emulator.table.api import TableApi
from airflow_tablestore.emulator.testing import EmulatorProcess


def _all_records(store: Store, table: str) -> list[tuple[int, int, int, PBRow, tuple[int, int, int]]]:
    out = []
    for p in store.stream.partitions(table):
        for e in store.stream.read(table, p.partition_id, 0, 10_000):
            data = e.record
            out.append((e.seq, e.timestamp_us, e.action, decode_row(data), _seq_info(data)))
    return sorted(out, key=lambda r: r[0])


def _seq_info(record: bytes) -> tuple[int, int, int]:
    i = record.rindex(b"\x0b\x18\x00\x00\x00\x0c\x13\x00\x00\x00\x0d")
    epoch = int.from_bytes(record[i + 11:i + 15], "little")
    ts = int.from_bytes(record[i + 16:i + 24], "little", signed=True)
    row_index = int.from_bytes(record[i + 25:i + 29], "little")
    return epoch, ts, row_index


def test_stream_records_contents_order_and_split(tmp_path: Path) -> None:
    with EmulatorProcess(data_dir=tmp_path, extra_args=["--stream-partitions", "2"]) as emu:
        w = Wire(emu.endpoint)
        create_table(w, "s", stream_hours=24)
        create_table(w, "nostream")
        put(w, "nostream", [("pk", 1)], {"a": 1})
        put(w, "s", [("pk", 1)], {"a": "x", "b": 2})
        update(w, "s", [("pk", 1)], [("a", None, OP_DELETE_ALL, None), ("c", 3, None, None),
                                     ("b", 5, OP_INCREMENT, None)])
        with pytest.raises(Exception, match="Condition check failed"):
            put(w, "s", [("pk", 1)], {"z": 1}, existence=2)  # failed writes log nothing
        delete(w, "s", [("pk", 1)])
        req = pb.BatchWriteRowRequest()
        t = req.tables.add(table_name="s")
        for i in range(10, 20):
            r = t.rows.add(type=pb.PUT, row_change=encode_row([("pk", i)], [("v", i, None, None)]))
            r.condition.row_existence = 0
        w.call("BatchWriteRow", req)
        before = emu.control.partitions("s")
        assert len(before) == 2 and not any(p["closed"] for p in before)
        children = emu.control.split_partition("s", before[0]["partition_id"])
        assert len(children) == 2 and all(c["parent_ids"] == [before[0]["partition_id"]] for c in children)
        for i in range(20, 40):
            put(w, "s", [("pk", i)], {"v": i})
        after = emu.control.partitions("s")
        assert len(after) == 4 and [p["closed"] for p in after] == [True, False, False, False]
    store = Store(tmp_path / "emulator.sqlite3")
    try:
        recs = _all_records(store, "s")
        assert [r[0] for r in recs] == list(range(1, len(recs) + 1)) and len(recs) == 3 + 10 + 20
        ts = [r[1] for r in recs]
        assert ts == sorted(ts) and len(set(ts)) == len(ts)
        seq, ts_us, action, row, seqinfo = recs[0]
        assert action == 1 and row.pk == [("pk", 1)]
        assert [(c.name, c.value, c.op) for c in row.cells] == [("a", "x", None), ("b", 2, None)]
        assert all(c.ts is not None for c in row.cells) and seqinfo == (0, ts_us, 0)
        _, _, action, row, _ = recs[1]
        assert action == 2
        assert [(c.name, c.value, c.op) for c in row.cells] == [
            ("a", None, OP_DELETE_ALL), ("c", 3, None), ("b", 7, None)]  # INCREMENT logged as PUT
        _, _, action, row, _ = recs[2]
        assert action == 3 and row.delete_marker and row.cells == []
        parts = store.stream.partitions("s")
        closed = parts[0]
        assert closed.closed and closed.closed_seq == 13
        assert all(e.seq <= 13 for e in store.stream.read("s", closed.partition_id, 0, 1000))
        later = [e for p in parts[1:] for e in store.stream.read("s", p.partition_id, 13, 1000)]
        assert len(later) == 20
        # paging by after_seq
        pid = parts[1].partition_id
        everything = store.stream.read("s", pid, 0, 1000)
        assert store.stream.read("s", pid, everything[0].seq, 2) == everything[1:3]
        assert store.stream.read("s", "nope", 0, 10) == []
        info = store.tables.get("nostream")
        assert info is not None and not info.stream_enabled and store.stream.partitions("nostream") == []
    finally:
        store.close()


def test_retention_trims_old_records(emulator: EmulatorProcess, wire: Wire) -> None:
    create_table(wire, "ret", stream_hours=1)
    put(wire, "ret", [("pk", 1)], {"a": 1})
    state = emulator.control.state()
    assert state["stream_records"] >= 1
    emulator.control.advance_time(2 * 3600)
    put(wire, "ret", [("pk", 2)], {"a": 2})
    assert emulator.control.trim("ret") == 1
    resp = emulator.control.set_retention("ret", 100)
    assert resp["hours"] == 100
    desc = wire.call("DescribeTable", pb.DescribeTableRequest(table_name="ret"))
    assert desc.stream_details.expiration_time == 100


def _api(tmp_path: Path) -> tuple[Store, TableApi]:
    clock = Clock()
    store = Store(tmp_path / "db.sqlite3", clock, stream_partitions=3)
    return store, TableApi(store, clock, EmulatorConfig())


def _create(api: TableApi, name: str) -> None:
    req = pb.CreateTableRequest()
    req.table_meta.table_name = name
    req.table_meta.primary_key.add(name="pk", type=1)
    req.reserved_throughput.capacity_unit.read = 0
    req.table_options.time_to_live = -1
    req.table_options.max_versions = 1
    req.stream_spec.enable_stream = True
    req.stream_spec.expiration_time = 24
    api.routes()["/CreateTable"](req.SerializeToString())


def _replay(snapshot: dict[bytes, dict[str, Any]], records: list[Any]) -> dict[bytes, dict[str, Any]]:
    state = {k: dict(v) for k, v in snapshot.items()}
    for e in records:
        row = decode_row(e.record)
        key = encode_key([v for _, v in row.pk])
        if e.action == 1:
            state[key] = {c.name: c.value for c in row.cells}
        elif e.action == 2:
            cur = state.setdefault(key, {})
            for c in row.cells:
                if c.op == OP_DELETE_ALL:
                    cur.pop(c.name, None)
                elif c.op is None:
                    cur[c.name] = c.value
            if not cur:
                del state[key]
        else:
            state.pop(key, None)
    return state


def test_snapshot_plus_stream_replays_exactly_under_concurrent_writes(tmp_path: Path) -> None:
    store, api = _api(tmp_path)
    try:
        _create(api, "snap")
        h = api.routes()
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer(seed: int) -> None:
            rnd = random.Random(seed)
            try:
                while not stop.is_set():
                    pk = [("pk", rnd.randrange(300))]
                    choice = rnd.random()
                    if choice < 0.6:
                        req = pb.BatchWriteRowRequest()
                        t = req.tables.add(table_name="snap")
                        for _ in range(20):
                            r = t.rows.add(type=pb.PUT, row_change=encode_row(
                                [("pk", rnd.randrange(300))], [("v", rnd.randrange(10**6), None, None)]))
                            r.condition.row_existence = 0
                        h["/BatchWriteRow"](req.SerializeToString())
                    elif choice < 0.8:
                        req = pb.UpdateRowRequest(table_name="snap", row_change=encode_row(
                            pk, [("u", seed, None, None), ("v", None, OP_DELETE_ALL, None)]))
                        req.condition.row_existence = 0
                        h["/UpdateRow"](req.SerializeToString())
                    else:
                        req = pb.DeleteRowRequest(table_name="snap",
                                                  primary_key=encode_row(pk, [], delete_marker=True))
                        req.condition.row_existence = 0
                        h["/DeleteRow"](req.SerializeToString())
            except BaseException as e:  # pragma: no cover - surfaced below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        snaps = []
        for _ in range(3):
            threading.Event().wait(0.05)
            snaps.append(store.snapshots.create("snap"))
        stop.set()
        for t in threads:
            t.join()
        assert not errors
        final = {}
        with store.db.reader() as conn:
            info = store.tables.get("snap")
            assert info is not None
            for key, data in conn.execute("SELECT key, data FROM rows WHERE tid=?", (info.table_id,)):
                final[key] = {n: vs[0][1] for n, vs in load_columns(data).items()}
        assert final
        for snap in snaps:
            base: dict[bytes, dict[str, Any]] = {}
            ranges = store.snapshots.ranges(snap.snapshot_id, 37)
            total = 0
            for start, end in ranges:
                after = None
                while True:
                    keys, bodies = store.snapshots.read(snap.snapshot_id, start, end, after, 25)
                    if not keys:
                        break
                    for key, body in zip(keys, bodies, strict=True):
                        row = decode_row(HEADER + body)
                        assert encode_key([v for _, v in row.pk]) == key
                        base[key] = {c.name: c.value for c in row.cells}
                    after = keys[-1]
                total += store.snapshots.row_count(snap.snapshot_id, start, end)
            assert total == len(base) == store.snapshots.row_count(snap.snapshot_id)
            records = [e for p in store.stream.partitions("snap")
                       for e in store.stream.read("snap", p.partition_id, snap.stream_seq, 10**6)]
            records.sort(key=lambda e: e.seq)
            assert _replay(base, records) == final
            store.snapshots.drop(snap.snapshot_id)
            assert store.snapshots.row_count(snap.snapshot_id) == 0
    finally:
        store.close()


def test_snapshot_of_100k_rows_is_fast_enough(tmp_path: Path) -> None:
    import time

    store, api = _api(tmp_path)
    try:
        _create(api, "big")
        info = store.tables.get("big")
        assert info is not None
        with store.db.write() as txn:
            txn.conn.executemany("INSERT INTO rows(tid, key, data) VALUES(?,?,?)",
                                 ((info.table_id, encode_key([i]), b"\xfb0") for i in range(100_000)))
        started = time.monotonic()
        snap = store.snapshots.create("big")
        elapsed = time.monotonic() - started
        assert store.snapshots.row_count(snap.snapshot_id) == 100_000
        assert len(store.snapshots.ranges(snap.snapshot_id, 10_000)) == 10
        print(f"snapshot of 100k rows took {elapsed:.2f}s")
    finally:
        store.close()


def test_public_stream_api(emulator: EmulatorProcess, wire: Wire) -> None:
    create_table(wire, "pub", stream_hours=24)
    streams = wire.call("ListStream", pb.ListStreamRequest(table_name="pub")).streams
    assert len(streams) == 1 and streams[0].table_name == "pub" and streams[0].creation_time > 0
    sid = streams[0].stream_id
    for i in range(30):
        put(wire, "pub", [("pk", i)], {"v": i})
    desc = wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid, shard_limit=1))
    assert desc.stream_status == pb.STREAM_ACTIVE and len(desc.shards) == 1 and desc.HasField("next_shard_id")
    desc = wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid))
    assert len(desc.shards) == 2 and not desc.HasField("next_shard_id")
    got: list[int] = []
    for shard in desc.shards:
        it = wire.call("GetShardIterator", pb.GetShardIteratorRequest(stream_id=sid, shard_id=shard.shard_id))
        iterator = it.shard_iterator
        while True:
            resp = wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=iterator, limit=7))
            for rec in resp.stream_records:
                row = decode_row(rec.record)
                assert rec.action_type == pb.PUT_ROW
                pk_value = row.pk[0][1]
                assert isinstance(pk_value, int)
                got.append(pk_value)
            assert resp.HasField("next_shard_iterator")  # open shard: always present
            if not resp.stream_records:
                break
            iterator = resp.next_shard_iterator
    assert sorted(got) == list(range(30))
    # a split closes the shard: after reading it fully, no next iterator
    parent = desc.shards[0].shard_id
    emulator.control.split_partition("pub", parent)
    desc = wire.call("DescribeStream", pb.DescribeStreamRequest(stream_id=sid))
    assert sum(1 for s in desc.shards if s.parent_id == parent) == 2
    iterator = wire.call("GetShardIterator", pb.GetShardIteratorRequest(stream_id=sid, shard_id=parent)).shard_iterator
    resp = wire.call("GetStreamRecord", pb.GetStreamRecordRequest(shard_iterator=iterator, limit=1000))
    assert resp.stream_records and not resp.HasField("next_shard_iterator")


def test_trimmed_seq_marks_lost_positions(tmp_path: Path) -> None:
    store, api = _api(tmp_path)
    try:
        _create(api, "trim")
        h = api.routes()

        def write(i: int) -> None:
            req = pb.PutRowRequest(table_name="trim", row=encode_row([("pk", 1)], [("v", i, None, None)]))
            req.condition.row_existence = 0
            h["/PutRow"](req.SerializeToString())

        write(1)
        write(2)
        (pid,) = {p.partition_id for p in store.stream.partitions("trim")
                  if store.stream.read("trim", p.partition_id, 0, 10)}
        assert store.stream.trimmed_seq("trim", pid) == 0
        store.clock.advance(25 * 3600)  # beyond the 24 h retention
        write(3)
        assert store.stream.trim("trim", force=True) == 2
        assert store.stream.trimmed_seq("trim", pid) == 2
        assert [e.seq for e in store.stream.read("trim", pid, 0, 10)] == [3]
        oldest = store.stream.read("trim", pid, 0, 1)[0].timestamp_us
        assert store.stream.oldest_retained_us("trim", pid) == oldest
    finally:
        store.close()
