"""The read cache: pages served from memory are the bytes SQLite gives for the same request, and a write makes
the emulator read SQLite again until the data is read twice at its new version."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from emu_wire import pb

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.table.api import TableApi
from testing.emulator_tunnel import TERMINATED, Env, SimWorker, delete, put

CACHE = 64 * 1024 * 1024


def _table(tmp_path: Path, page_rows: int = 40) -> tuple[Store, TableApi]:
    store = _small(Store(tmp_path / "db.sqlite3", Clock(), stream_partitions=2))
    api = TableApi(store, store.clock, EmulatorConfig(range_page_rows=page_rows))
    req = pb.CreateTableRequest()
    req.table_meta.table_name = "t"
    req.table_meta.primary_key.add(name="pk", type=1)
    req.reserved_throughput.capacity_unit.read = 0
    req.table_options.time_to_live = -1
    req.table_options.max_versions = 2
    api.routes()["/CreateTable"](req.SerializeToString())
    return store, api


def _put(api: TableApi, pk: int, value: Any) -> None:
    req = pb.PutRowRequest(table_name="t", row=encode_row([("pk", pk)], [("v", value, None, None)]))
    req.condition.row_existence = 0
    api.routes()["/PutRow"](req.SerializeToString())


def _get_range(api: TableApi, start: Any, end: Any, **extra: Any) -> bytes:
    req = pb.GetRangeRequest(table_name="t", direction=0, inclusive_start_primary_key=encode_primary_key(
        [("pk", start)]), exclusive_end_primary_key=encode_primary_key([("pk", end)]), **extra)
    return _serialized(api.routes()["/GetRange"](req.SerializeToString()))


def _serialized(answer: Any) -> bytes:
    """A handler's answer as bytes: the message serialized, or the bytes it assembled itself."""
    return answer if isinstance(answer, bytes) else bytes(answer.SerializeToString())


REQUESTS: list[tuple[Any, Any, dict[str, Any]]] = [
    (INF_MIN, INF_MAX, {"max_versions": 1}),
    (INF_MIN, INF_MAX, {"max_versions": 2}),
    (INF_MIN, INF_MAX, {"max_versions": 5}),
    (INF_MIN, INF_MAX, {"max_versions": 1, "limit": 7}),
    (13, 14, {"max_versions": 1}),
    (13, 13_000, {"max_versions": 1, "limit": 1}),
    (-5, 3, {"max_versions": 1}),
    (5_000, INF_MAX, {"max_versions": 1}),  # past the last row: empty
    (INF_MIN, INF_MAX, {"max_versions": 1, "columns_to_get": ["v"]}),  # shaped: SQLite always
]


def _pages(api: TableApi) -> list[bytes]:
    """Every request above, paged to its end (each page's bytes, next key included)."""
    out = []
    for start, end, extra in REQUESTS:
        page = _get_range(api, start, end, **extra)
        out.append(page)
        answer = pb.GetRangeResponse.FromString(page)
        while answer.next_start_primary_key:
            req = pb.GetRangeRequest(table_name="t", direction=0,
                                     inclusive_start_primary_key=answer.next_start_primary_key,
                                     exclusive_end_primary_key=encode_primary_key([("pk", end)]), **extra)
            page = _serialized(api.routes()["/GetRange"](req.SerializeToString()))
            out.append(page)
            answer = pb.GetRangeResponse.FromString(page)
    return out


def _small(store: Store) -> Store:
    """Runs built after a page of these small tables (the default waits for 2 000 rows read from SQLite)."""
    store.read_cache.min_rows = 1
    return store


def _from_sqlite(store: Store, read: Any, *args: Any) -> Any:
    """``read(*args)`` with the read cache off (it is on again, empty, afterwards)."""
    store.read_cache.clear(0)
    try:
        return read(*args)
    finally:
        store.read_cache.clear(CACHE)


def test_get_range_pages_from_memory_are_the_sqlite_bytes(tmp_path: Path) -> None:
    store, api = _table(tmp_path)
    try:
        rng = random.Random(7)
        for pk in rng.sample(range(-50, 3000), 150):
            _put(api, pk, rng.choice([pk, f"s{pk}" * rng.randint(0, 30), float(pk), pk % 2 == 0, b"\x00\x01"]))
        _put(api, 13, "second version")  # a row with two versions
        store.read_cache.clear(CACHE)
        first = _pages(api)  # notes the version
        hits = store.read_cache.hits
        second = _pages(api)  # read again with no write between: from memory
        assert store.read_cache.hits > hits
        assert first == second == _from_sqlite(store, lambda: _pages(api))
    finally:
        store.close()


def test_a_write_sends_reads_back_to_sqlite_until_read_twice(tmp_path: Path) -> None:
    store, api = _table(tmp_path, page_rows=5000)
    try:
        for pk in range(100):
            _put(api, pk, pk)
        whole = (INF_MIN, INF_MAX)
        _get_range(api, *whole, max_versions=1)
        _get_range(api, *whole, max_versions=1)
        hits = store.read_cache.hits
        _put(api, 1000, "new")
        after_write = _get_range(api, *whole, max_versions=1)
        assert store.read_cache.hits == hits  # the run of the old version is not used
        assert after_write == _from_sqlite(store, lambda: _get_range(api, *whole, max_versions=1))
        assert b"new" in after_write
        _get_range(api, *whole, max_versions=1)
        assert _get_range(api, *whole, max_versions=1) == after_write
        assert store.read_cache.hits > hits
    finally:
        store.close()


def test_a_page_at_the_4_mb_cut_is_read_from_sqlite(tmp_path: Path) -> None:
    store, api = _table(tmp_path, page_rows=5000)
    try:
        for pk in range(12):
            _put(api, pk, b"x" * (700 * 1024 + pk))
        pages = [_pages(api) for _ in range(3)]
        assert len(pages[0]) > len(REQUESTS)  # the whole-table requests took more than one page
        assert pages[0] == pages[1] == pages[2] == _from_sqlite(store, lambda: _pages(api))
    finally:
        store.close()


@pytest.mark.parametrize("max_read_records", [7, 1000])
def test_tunnel_answers_from_memory_are_the_sqlite_answers(tmp_path: Path, max_read_records: int) -> None:
    """Base and stream channels read token by token: each answer the same from memory and from SQLite."""
    env = Env(tmp_path, max_read_records=max_read_records)
    _small(env.store)
    try:
        table = env.create_table()
        for pk in range(60):
            put(env.store, table, pk, f"v{pk}" * (pk % 5))
        tid = env.tunnel.create(table, "t", 3)
        for pk in range(0, 60, 3):
            put(env.store, table, pk, "changed")
        for pk in range(0, 60, 7):
            delete(env.store, table, pk)
        now = env.clock.now_us()  # frozen from here: answers (next tokens included) depend on nothing else
        env.clock.now_us = lambda: now  # type: ignore[method-assign]
        env.clock.now_ms = lambda: now // 1000  # type: ignore[method-assign]
        env.clock.now_ns = lambda: now * 1000  # type: ignore[method-assign]
        worker = SimWorker(env.tunnel, tid, "cache")
        client = worker.client_id
        seen: dict[str, int] = {}  # channel → records read
        hits = env.store.read_cache.hits
        for _ in range(20):  # heartbeats: base channels first, stream channels once they are done
            worker.beat()
            for cid in sorted(worker.open_channels() - set(seen)):
                seen[cid] = 0
                token, seq = env.tunnel.get_checkpoint(tid, client, cid)
                while token != "finished":
                    answers = [env.tunnel.read(tid, client, cid, token) for _ in range(2)]
                    answers.append(_from_sqlite(env.store, env.tunnel.read, tid, client, cid, token))
                    assert len({a.SerializeToString() for a in answers}) == 1
                    head = answers[0]
                    seen[cid] += len(head.records)
                    if not head.records and not head.may_more_record and head.next_token != "finished":
                        break  # an open stream channel at its head
                    token, seq = head.next_token, seq + 1
                    env.tunnel.checkpoint(tid, client, cid, token, seq)
                if token == "finished":
                    worker.local[cid] = (worker.local[cid][0] + 1, TERMINATED)
        assert sum(seen.values()) == 60 + 20 + 9  # the base rows, then every change after the snapshot
        assert env.store.read_cache.hits > hits
    finally:
        env.store.close()


def test_reads_a_few_rows_at_a_time_between_writes_never_build_a_run(tmp_path: Path) -> None:
    store, api = _table(tmp_path, page_rows=1000)
    store.read_cache.min_rows = 2000  # the default
    try:
        for pk in range(3000):
            _put(api, pk, pk)
        for i in range(50):  # a polled first row, a write now and then
            _get_range(api, INF_MIN, INF_MAX, max_versions=1, limit=1)
            if i % 10 == 0:
                _put(api, 5000 + i, i)
        assert store.read_cache.hits == 0
        drains = [_pages(api) for _ in range(2)]  # 2 000 rows from SQLite, then a run
        assert store.read_cache.hits > 0
        assert drains[0] == drains[1] == _from_sqlite(store, _pages, api)
    finally:
        store.close()
