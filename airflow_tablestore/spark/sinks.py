"""Where a round's records go. Writers run inside the Spark task that read the channel.

Writing in the reading task keeps the data written and the control row the driver checkpoints from the very
same read (a cached DataFrame recomputed after an executor loss could otherwise end at a different token).
Both sinks are idempotent per ``(channel, start token)``, so replaying a round after a crash is harmless:

* :class:`TablestoreSink` replays the records in channel order with their original cell versions; a
  batch never holds the same row twice; rows that still fail after retries fail the task (never dropped).
* :class:`ParquetSink` writes one file per (channel, start-token hash) with a deterministic name, atomically
  (temporary file then rename), so a replay overwrites instead of duplicating.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import PrimaryKey, Record, RowWrite
from airflow_tablestore.spark.changes import CHANGE_SCHEMA, record_to_write, records_to_arrow
from airflow_tablestore.spark.settings import TablestoreSettings

FLUSH_ROWS = 1000
"""Buffered writes per ``write_rows`` call (it chunks them into legal ≤200-row batches)."""


def chunk_id(start_token: str) -> str:
    """Stable short id of a round's start token (names Parquet files, tags change-log rows)."""
    return hashlib.sha1(start_token.encode()).hexdigest()[:20]


class ChannelWriter(Protocol):
    """Receives one channel's records of one round, in order."""

    def write(self, records: Sequence[Record]) -> None: ...

    def close(self) -> int:
        """Flush everything; return the number of records written. Raises if anything could not be written."""
        ...


class Sink(Protocol):
    """A picklable sink description; :meth:`open` runs on the executor."""

    def describe(self) -> str: ...

    def check(self) -> None:
        """Fail fast on the driver when the sink cannot work (missing table, unwritable path)."""
        ...

    def open(self, channel_id: str, start_token: str) -> ChannelWriter: ...


# ---- Tablestore -------------------------------------------------------------------------------------


class _TablestoreWriter:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table
        self._buffer: list[RowWrite] = []
        self._keys: set[PrimaryKey] = set()
        self._count = 0

    def write(self, records: Sequence[Record]) -> None:
        for record in records:
            self._count += 1
            write = record_to_write(self._table, record)
            if write is None:
                continue
            if write.primary_key in self._keys or len(self._buffer) >= FLUSH_ROWS:
                self._flush()  # one row at most once per batch: order between changes of a row is kept
            self._buffer.append(write)
            self._keys.add(write.primary_key)

    def _flush(self) -> None:
        if self._buffer:
            self._client.write_rows(self._buffer)
        self._buffer = []
        self._keys = set()

    def close(self) -> int:
        try:
            self._flush()
        finally:
            self._client.close()
        return self._count


@dataclass(frozen=True)
class TablestoreSink:
    """Replicate into ``table`` of the instance described by ``settings``."""

    settings: TablestoreSettings
    table: str
    request_timeout: float = 60.0

    def describe(self) -> str:
        return f"tablestore table {self.table!r} on {self.settings.endpoint} ({self.settings.instance_name})"

    def check(self) -> None:
        client = self.settings.table_client(timeout=self.request_timeout)
        try:
            client.describe_table(self.table)
        finally:
            client.close()

    def open(self, channel_id: str, start_token: str) -> ChannelWriter:
        return _TablestoreWriter(self.settings.table_client(timeout=self.request_timeout), self.table)


# ---- Parquet ----------------------------------------------------------------------------------------


def _filesystem(path: str) -> tuple[Any, str]:
    from pyarrow import fs as pafs

    if "://" not in path:
        path = os.path.abspath(path)
    filesystem, base = pafs.FileSystem.from_uri(path)
    return filesystem, base.rstrip("/")


def safe_name(channel_id: str) -> str:
    """A channel id usable as a directory name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "%" + format(ord(ch), "02X") for ch in channel_id)


def chunk_path(base: str, channel_id: str, start_token: str) -> str:
    """Deterministic file of one (channel, start token): ``<base>/channel=<id>/part-<hash>.parquet``."""
    return f"{base}/channel={safe_name(channel_id)}/part-{chunk_id(start_token)}.parquet"


ROW_GROUP_BYTES = 16 * 1024 * 1024
"""Records are buffered up to about this many (Arrow) bytes, then written as one row group."""


class _ParquetWriter:
    """Streams a round's records of one channel into a hidden temporary file, a row group every
    ``ROW_GROUP_BYTES`` (memory holds at most that plus one tunnel read, not the round), and renames it to the
    deterministic chunk name on close."""

    def __init__(self, path: str, channel_id: str, start_token: str) -> None:
        self._path = path
        self._channel_id = channel_id
        self._chunk = chunk_id(start_token)
        self._start_token = start_token
        self._count = 0
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._writer: Any = None
        self._filesystem: Any = None
        self._tmp = ""
        self._final = ""

    def _open(self) -> None:
        import pyarrow.parquet as pq

        filesystem, base = _filesystem(self._path)
        self._final = chunk_path(base, self._channel_id, self._start_token)
        directory = self._final.rsplit("/", 1)[0]
        filesystem.create_dir(directory, recursive=True)
        self._tmp = f"{directory}/.tmp-{uuid.uuid4().hex}.parquet"  # hidden from Spark/Arrow dataset readers
        self._filesystem = filesystem
        self._writer = pq.ParquetWriter(self._tmp, CHANGE_SCHEMA, filesystem=filesystem)

    def write(self, records: Sequence[Record]) -> None:
        if not records:
            return
        table = records_to_arrow(records, self._channel_id, self._chunk, self._count)
        self._count += len(records)
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        if self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._open()
        try:
            self._writer.write_table(pa.concat_tables(self._pending))
        except BaseException:
            self._discard()
            raise
        self._pending, self._pending_bytes = [], 0

    def _discard(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            with contextlib.suppress(OSError):
                self._filesystem.delete_file(self._tmp)
            self._writer = None

    def close(self) -> int:
        self._flush()
        if self._writer is None:
            return 0
        try:
            self._writer.close()
            self._writer = None
            self._filesystem.move(self._tmp, self._final)  # atomic rename on local and HDFS filesystems
        except BaseException:
            self._discard()
            with contextlib.suppress(OSError):
                self._filesystem.delete_file(self._tmp)
            raise
        return self._count


@dataclass(frozen=True)
class ParquetSink:
    """A Parquet change log under ``path`` (local path or a URI pyarrow understands: ``s3://``, ``hdfs://``)."""

    path: str

    def describe(self) -> str:
        return f"parquet change log at {self.path}"

    def check(self) -> None:
        try:
            filesystem, base = _filesystem(self.path)
            filesystem.create_dir(base, recursive=True)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise TablestoreClientError(f"cannot use parquet sink path {self.path}: {exc}") from None

    def open(self, channel_id: str, start_token: str) -> ChannelWriter:
        return _ParquetWriter(self.path, channel_id, start_token)


def read_change_log(path: str) -> pa.Table:
    """Every change-log file under ``path`` as one table (ordered by channel, chunk file, position)."""
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs

    filesystem, base = _filesystem(path)
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    files = sorted(
        info.path for info in filesystem.get_file_info(selector)
        if info.type == pafs.FileType.File and info.path.endswith(".parquet")
        and not info.base_name.startswith((".", "_"))
    )
    tables = [pq.read_table(f, filesystem=filesystem, schema=CHANGE_SCHEMA) for f in files]
    if not tables:
        return CHANGE_SCHEMA.empty_table()
    return pa.concat_tables(tables)
