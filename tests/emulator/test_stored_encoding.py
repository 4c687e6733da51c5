"""Rows kept encoded: GetRange and snapshot reads answer the same bytes from a row's stored encoding as from
encoding its cells at read time, whatever the TTL, the version limits and the request shaping."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from emu_wire import pb

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.table.api import TableApi


def _setup(tmp_path: Path, *, ttl: int, max_versions: int) -> tuple[Store, TableApi, Clock]:
    clock = Clock()
    store = Store(tmp_path / "db.sqlite3", clock, stream_partitions=2)
    api = TableApi(store, clock, EmulatorConfig())
    req = pb.CreateTableRequest()
    req.table_meta.table_name = "t"
    req.table_meta.primary_key.add(name="pk", type=1)
    req.table_meta.primary_key.add(name="s", type=2)
    req.reserved_throughput.capacity_unit.read = 0
    req.table_options.time_to_live = ttl
    req.table_options.max_versions = max_versions
    api.routes()["/CreateTable"](req.SerializeToString())
    return store, api, clock


def _call(api: TableApi, path: str, req: Any) -> Any:
    return api.routes()[path](req.SerializeToString())


def _answer(resp: Any) -> Any:
    """A GetRange handler's answer as a message (from the read cache it comes serialized)."""
    return pb.GetRangeResponse.FromString(resp) if isinstance(resp, bytes) else resp


def _put(api: TableApi, pk: int, cells: list[tuple[str, Any, int | None]], *, update: bool = False) -> None:
    row = encode_row([("pk", pk), ("s", f"k{pk}")], [(n, v, None, ts) for n, v, ts in cells])
    req: Any = (pb.UpdateRowRequest(table_name="t", row_change=row) if update
                else pb.PutRowRequest(table_name="t", row=row))
    req.condition.row_existence = 0
    _call(api, "/UpdateRow" if update else "/PutRow", req)


def _ranges(api: TableApi) -> list[bytes]:
    """GetRange answers (rows + next key, both directions) for plain and shaped requests."""
    answers = []
    lo, hi = [("pk", INF_MIN), ("s", INF_MIN)], [("pk", INF_MAX), ("s", INF_MAX)]
    for direction, start, end in ((0, lo, hi), (1, hi, lo)):
        for extra in ({"max_versions": 1}, {"max_versions": 2}, {"max_versions": 5}, {"max_versions": 1, "limit": 3},
                      {"max_versions": 1, "columns_to_get": ["b"]},
                      {"time_range": pb.TimeRange(start_time=0, end_time=2**62)}):
            req = pb.GetRangeRequest(table_name="t", direction=direction,
                                     inclusive_start_primary_key=encode_primary_key(start),
                                     exclusive_end_primary_key=encode_primary_key(end), **extra)
            resp = _answer(_call(api, "/GetRange", req))
            answers.append(resp.rows + b"|" + resp.next_start_primary_key)
    return answers


def _snapshot(store: Store, sid: int) -> list[tuple[bytes, bytes]]:
    return list(zip(*store.snapshots.read(sid, None, None, None, 1000), strict=True))


def _both_ways(store: Store, api: TableApi, sid: int) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """The answers from the stored encodings, checked equal to the answers without them (as a data dir of an
    older version holds its rows), which are then put back."""
    fast = (_ranges(api), _snapshot(store, sid))
    assert (_ranges(api), _snapshot(store, sid)) == fast  # read again: from the read cache where it applies
    with store.db.write() as txn:
        saved = {t: txn.execute(f"SELECT rec, nv, oldest, key FROM {t}") for t in ("rows", "snap_rows")}
        for t in saved:
            txn.execute(f"UPDATE {t} SET rec=NULL, nv=NULL, oldest=NULL")
    cache_bytes = store.read_cache.max_bytes
    store.read_cache.clear(0)  # the encodings went behind the store's back: read SQLite only
    assert (_ranges(api), _snapshot(store, sid)) == fast
    store.read_cache.clear(cache_bytes)
    with store.db.write() as txn:
        for t, rows in saved.items():
            txn.conn.executemany(f"UPDATE {t} SET rec=?, nv=?, oldest=? WHERE key=?", rows)
    return fast


def _write_rows(api: TableApi, now_ms: int) -> None:
    _put(api, 1, [("a", 1, None), ("b", "x" * 30, None)])
    _put(api, 2, [("a", 1.5, now_ms - 9000), ("a", 2.5, now_ms - 8000), ("b", b"\x00\x01", now_ms - 7000)])
    _put(api, 3, [])  # a row without columns
    _put(api, 4, [("c", True, now_ms - 9000)])
    _put(api, 4, [("c", False, now_ms - 1000), ("d", 7, None)], update=True)
    for pk in range(5, 12):
        _put(api, pk, [("a", pk, None)])


def test_ttl_and_version_limits_answer_the_same_bytes(tmp_path: Path) -> None:
    store, api, clock = _setup(tmp_path, ttl=86400, max_versions=3)
    try:
        _write_rows(api, clock.now_ms())
        assert store.db.query("SELECT COUNT(*) FROM rows WHERE rec IS NOT NULL")[0][0] == 11
        sid = store.snapshots.create("t").snapshot_id
        answers = [_both_ways(store, api, sid)]
        req = pb.UpdateTableRequest(table_name="t")  # rows keep their stored versions; reads must trim them
        req.table_options.max_versions = 1
        _call(api, "/UpdateTable", req)
        answers.append(_both_ways(store, api, sid))
        clock.advance(86400 - 4)  # the explicitly stamped, older versions expire (stamps 7-9 s old)
        answers.append(_both_ways(store, api, sid))
        req.table_options.max_versions = 3
        _call(api, "/UpdateTable", req)
        answers.append(_both_ways(store, api, sid))
        assert len(answers[0][1]) == 11
        assert answers[0][0] != answers[1][0] != answers[2][0]  # each step changed what GetRange answers
    finally:
        store.close()


def test_data_dir_of_an_older_version_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE rows(tid INTEGER NOT NULL, key BLOB NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY(tid, key)) WITHOUT ROWID;
        CREATE TABLE snap_rows(sid INTEGER NOT NULL, key BLOB NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY(sid, key)) WITHOUT ROWID;
    """)
    conn.close()
    store = Store(path, Clock())
    try:
        for table in ("rows", "snap_rows"):
            columns = [r[1] for r in store.db.query(f"PRAGMA table_info({table})")]
            assert columns[-3:] == ["rec", "nv", "oldest"]
    finally:
        store.close()
