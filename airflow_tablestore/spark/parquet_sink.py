"""The Parquet change-log sink: one file per committed round, staged until its checkpoint is stored.

Layout under the sink path (readers skip ``_``/``.`` names, as Spark and pyarrow datasets do)::

    channel=<id>/part-<hash(start token)>.parquet           published: the committed chain of rounds
    _staging/channel=<id>/<seq>-<hash(start)>-<hash(end)>.parquet   a finished round awaiting its checkpoint
    _staging/channel=<id>/.tmp-<uuid>.parquet                a round being written

A task streams its records into a hidden temporary file, a row group every :data:`ROW_GROUP_BYTES`, and on
close renames it to its staged name. The driver moves a staged file into place only after the checkpoint
``(end token, seq)`` is stored. Checkpoint sequence numbers are unique per channel, so of all the staged
files a stale driver, a replay or a crash may leave, exactly one can match the stored checkpoint: recovery
publishes that one and deletes those with a sequence at or below it. Two published files therefore never
hold the same change, and no file is published for a round whose checkpoint did not land.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import Record
from airflow_tablestore.spark.changes import CHANGE_SCHEMA, records_to_arrow

log = logging.getLogger("airflow_tablestore.spark")

ROW_GROUP_BYTES = 16 * 1024 * 1024
"""Records are buffered up to about this many (Arrow) bytes, then written as one row group."""

STAGING = "_staging"
STALE_TEMP_S = 24 * 3600
"""Temporary files of writers that died are deleted by recovery once they are this old."""


def chunk_id(token: str) -> str:
    """Stable short id of a token (names Parquet files, tags change-log rows with the round's start)."""
    return hashlib.sha1(token.encode()).hexdigest()[:20]


def safe_name(channel_id: str) -> str:
    """A channel id usable as a directory name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "%" + format(ord(ch), "02X") for ch in channel_id)


def chunk_path(base: str, channel_id: str, start_token: str) -> str:
    """The published file of one (channel, start token): ``<base>/channel=<id>/part-<hash>.parquet``."""
    return _published(base, channel_id, chunk_id(start_token))


def _published(base: str, channel_id: str, start_chunk: str) -> str:
    return f"{base}/channel={safe_name(channel_id)}/part-{start_chunk}.parquet"


def _staging_dir(base: str, channel_id: str) -> str:
    return f"{base}/{STAGING}/channel={safe_name(channel_id)}"


def staged_name(sequence: int, start_token: str, end_token: str) -> str:
    """File name of a finished, unpublished round (sequence first: recovery compares it numerically)."""
    return f"{sequence:012d}-{chunk_id(start_token)}-{chunk_id(end_token)}.parquet"


def _filesystem(path: str) -> tuple[Any, str]:
    from pyarrow import fs as pafs

    if "://" not in path:
        path = os.path.abspath(path)
    filesystem, base = pafs.FileSystem.from_uri(path)
    return filesystem, base.rstrip("/")


class _ParquetWriter:
    """Streams a round's records of one channel into a hidden temporary file and stages it on close."""

    def __init__(self, path: str, channel_id: str, start_token: str, sequence: int) -> None:
        self._path = path
        self._channel_id = channel_id
        self._chunk = chunk_id(start_token)
        self._start_token = start_token
        self._sequence = sequence
        self._count = 0
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._writer: Any = None
        self._filesystem: Any = None
        self._tmp = ""
        self._directory = ""
        self.refused = 0

    def _open(self) -> None:
        import pyarrow.parquet as pq

        filesystem, base = _filesystem(self._path)
        self._directory = _staging_dir(base, self._channel_id)
        filesystem.create_dir(self._directory, recursive=True)
        self._tmp = f"{self._directory}/.tmp-{uuid.uuid4().hex}.parquet"
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

    def abort(self) -> None:
        self._pending = []
        self._discard()

    def close(self, end_token: str) -> int:
        self._flush()
        if self._writer is None:
            return 0
        staged = f"{self._directory}/{staged_name(self._sequence, self._start_token, end_token)}"
        try:
            self._writer.close()
            self._writer = None
            self._filesystem.move(self._tmp, staged)  # atomic rename on local and HDFS filesystems
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

    def open(self, channel_id: str, start_token: str, sequence: int) -> _ParquetWriter:
        return _ParquetWriter(self.path, channel_id, start_token, sequence)

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        """Move the round's staged file into the change log (idempotent: a published file stays)."""
        filesystem, base = _filesystem(self.path)
        staged = f"{_staging_dir(base, channel_id)}/{staged_name(sequence, start_token, end_token)}"
        self._move(filesystem, staged, chunk_path(base, channel_id, start_token))

    @staticmethod
    def _move(filesystem: Any, staged: str, final: str) -> None:
        from pyarrow import fs as pafs

        if filesystem.get_file_info(staged).type != pafs.FileType.File:
            if filesystem.get_file_info(final).type == pafs.FileType.File:
                return  # published before (by recovery, or a retried publish)
            raise TablestoreClientError(f"the staged change-log file {staged} of a committed round is missing")
        filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
        filesystem.move(staged, final)

    def recover(self, channel_id: str, token: str, sequence: int) -> None:
        from pyarrow import fs as pafs

        filesystem, base = _filesystem(self.path)
        directory = _staging_dir(base, channel_id)
        selector = pafs.FileSelector(directory, allow_not_found=True)
        committed_end = chunk_id(token)
        now = time.time()
        for info in filesystem.get_file_info(selector):
            name = info.base_name
            if name.startswith(".tmp-"):
                mtime = info.mtime.timestamp() if info.mtime is not None else now
                if now - mtime > STALE_TEMP_S:
                    with contextlib.suppress(OSError):
                        filesystem.delete_file(info.path)
                continue
            parts = name.removesuffix(".parquet").split("-")
            if len(parts) != 3 or not parts[0].isdigit():
                continue
            staged_seq, start_chunk, end_chunk = int(parts[0]), parts[1], parts[2]
            if staged_seq == sequence and end_chunk == committed_end:
                log.info("publishing round %s of channel %s: its checkpoint was stored by a run that stopped "
                         "before publishing it", name, channel_id)
                self._move(filesystem, info.path, _published(base, channel_id, start_chunk))
            elif staged_seq <= sequence:
                with contextlib.suppress(OSError):
                    filesystem.delete_file(info.path)  # a round that was never (and can no longer be) committed

    def staged_channels(self) -> list[str]:
        """Channel ids (as stored: directory names) with staged output."""
        from pyarrow import fs as pafs

        filesystem, base = _filesystem(self.path)
        selector = pafs.FileSelector(f"{base}/{STAGING}", allow_not_found=True)
        out = []
        for info in filesystem.get_file_info(selector):
            if info.type == pafs.FileType.Directory and info.base_name.startswith("channel="):
                inner = pafs.FileSelector(info.path, allow_not_found=True)
                if any(not i.base_name.startswith(".") for i in filesystem.get_file_info(inner)):
                    out.append(unquote(info.base_name.removeprefix("channel=")))
        return sorted(out)


def read_change_log(path: str) -> pa.Table:
    """Every published change-log file under ``path`` as one table (ordered by channel, chunk file,
    position); staged and temporary files are skipped."""
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs

    filesystem, base = _filesystem(path)
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    files = sorted(
        info.path for info in filesystem.get_file_info(selector)
        if info.type == pafs.FileType.File and info.path.endswith(".parquet")
        and not any(part.startswith((".", "_")) for part in info.path[len(base):].split("/") if part)
    )
    tables = [pq.read_table(f, filesystem=filesystem, schema=CHANGE_SCHEMA) for f in files]
    if not tables:
        return CHANGE_SCHEMA.empty_table()
    return pa.concat_tables(tables)
