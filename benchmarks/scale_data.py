"""The scale benchmarks' data: a table of ``rows`` rows loaded once per row count, then served at any channel count.

Loading over HTTP is the slow part of a scale point (the emulator stores every row through BatchWriteRow), so
:func:`base_data_dir` loads the base rows once, with the table's stream off (no stream record per row), into an
emulator data directory (the emulator's SQLite store) kept in ``benchmarks/.cache/`` (gitignored). The cache key
names the row count, the row layout (:data:`SCHEMA`), :data:`FORMAT_VERSION` and a digest of the emulator's
store schema, so a cache written by another layout or store is never reused; a directory without its
``complete`` marker (a load that was interrupted) is loaded again.

:func:`scale_point` serves one point: it copies the cached directory, starts an emulator on the copy with
``--stream-partitions N --base-channel-rows rows/N``, enables the table's stream through ``update_table`` (the
emulator then opens ``N`` stream partitions, as the service opens a stream's shards when it is enabled) and
checks that the stream has ``N`` shards. The benchmark then creates its tunnels and writes the updates with
:func:`write_changes`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from airflow_tablestore.client.model import Column, RowWrite, StreamSpec, WriteType
from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.common import load_user_rows

TABLE = "bench_scale"
CACHE = Path(__file__).resolve().parent / ".cache"
FORMAT_VERSION = 1
SCHEMA = "id:int;name:str,score:int,ratio:float,active:bool"
"""The row layout :func:`~benchmarks.common.load_user_rows` writes; change it with that function."""
_STORE_SCHEMA = Path(__file__).resolve().parent.parent / "airflow_tablestore" / "emulator" / "store" / "core.py"


@dataclass
class ScalePoint:
    """A running emulator serving ``rows`` rows of :data:`TABLE` over ``channels`` channels, stream on."""

    emulator: EmulatorProcess
    rows: int
    channels: int
    load_s: float
    """Seconds this point spent loading the base rows (0 when they came from the cache)."""
    copy_s: float
    """Seconds copying the cached data directory and enabling the stream took."""


def cache_key(rows: int) -> str:
    store = hashlib.sha256(_STORE_SCHEMA.read_bytes()).hexdigest()[:10]
    layout = hashlib.sha256(SCHEMA.encode()).hexdigest()[:10]
    return f"{TABLE}-{rows}-{layout}-v{FORMAT_VERSION}-{store}"


def base_data_dir(rows: int) -> tuple[Path, float]:
    """The cached data directory holding ``rows`` base rows (stream off), loading it first if needed; returns
    the directory and the seconds spent loading (0 on a cache hit)."""
    target = CACHE / cache_key(rows)
    if (target / "complete").exists():
        return target, 0.0
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix="loading-", dir=CACHE))
    started = time.monotonic()
    try:
        with EmulatorProcess(data_dir=work, extra_args=["--log-level", "WARNING"]) as emu, \
                TableClient(**emu.client_kwargs) as tables:
            load_user_rows(tables, TABLE, rows)
        load_s = time.monotonic() - started
        (work / "complete").write_text(f"{rows} rows loaded in {load_s:.1f} s\n")
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    print(f"  loaded {rows:,} base rows (stream off) into {target.name} in {load_s:.0f} s "
          f"({rows / load_s:,.0f} rows/s)", flush=True)
    return target, load_s


@contextmanager
def scale_point(rows: int, channels: int) -> Iterator[ScalePoint]:
    """An emulator on a copy of the cached ``rows`` rows, with ``channels`` stream partitions and base channels of
    ``rows / channels`` rows, the table's stream enabled (24 h retention)."""
    source, load_s = base_data_dir(rows)
    with tempfile.TemporaryDirectory(prefix=f"scale-{rows}-{channels}-") as tmp:
        started = time.monotonic()
        data = Path(tmp) / "data"
        shutil.copytree(source, data)
        args = ["--stream-partitions", str(channels), "--base-channel-rows", str(-(-rows // channels)),
                "--log-level", "WARNING"]
        with EmulatorProcess(data_dir=data, extra_args=args) as emu:
            with TableClient(**emu.client_kwargs) as tables, StreamClient(**emu.client_kwargs) as streams:
                tables.update_table(TABLE, stream=StreamSpec(enabled=True, expiration_hours=24))
                stream_id = streams.stream_id_of(TABLE)
                shards = len(streams.describe_stream(stream_id).shards) if stream_id else 0
            if shards != channels:
                raise RuntimeError(f"the stream enabled on {TABLE} has {shards} shards, expected {channels}")
            yield ScalePoint(emu, rows, channels, load_s, time.monotonic() - started)


def write_changes(tables: TableClient, rows: int) -> int:
    """Update every row once (one stream record each: the stream holds as many records as the base data, so the
    StreamWorker and the incremental phase read ``rows`` records too); returns how many."""
    keys = range(rows)
    tables.write_rows(RowWrite(TABLE, WriteType.UPDATE, (("id", i),), (Column("score", -i),)) for i in keys)
    return len(keys)
