"""The Parquet change-log sink: one file per committed round, staged until its checkpoint is stored.

The layout under the sink path (file and partition names, staging; the rebuild's swap) is
:mod:`airflow_tablestore.client.changelog`, shared with the Airflow operators. With ``partition_by`` ``hour`` or
``day`` each change goes to the ``interval=`` partition of its commit time, so once the stream is consumed past
the end of an interval its partition holds exactly the changes committed in it, however far a run read.

A task streams its records into a hidden temporary file, a row group every :data:`ROW_GROUP_BYTES`, and on
close renames it to its staged name. The driver moves a staged file into place only after the checkpoint
``(end token, seq)`` is stored. Checkpoint sequence numbers are unique per channel, so of all the staged
files a stale driver, a replay or a crash may leave, exactly one can match the stored checkpoint: recovery
publishes that one and deletes those with a sequence at or below it. Two published files therefore never
hold the same change, and no file is published for a round whose checkpoint did not land.

Each answer's :class:`~airflow_tablestore.client.records.Records` becomes its change-log table straight from the
PlainBuffer bytes (``records_to_arrow``, in C where the compiled module is in use) and is split by commit time on
the table's ``sequence_timestamp_us`` column, with no record object.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa

from airflow_tablestore.client.changelog import (
    NO_PARTITION,
    PARTITIONINGS,
    STAGING,
    chunk_id,
    filesystem_of,
    interval_step,
    parse_staged,
    partition_of,
    published_path,
    safe_name,
    staged_name,
    staging_dir,
)
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.records import Records
from airflow_tablestore.spark.arrow.changes import CHANGE_SCHEMA, records_to_arrow

log = logging.getLogger(__name__)

ROW_GROUP_BYTES = 8 * 1024 * 1024
"""Records are buffered up to about this many (Arrow) bytes, then written as one row group: a task's memory
holds one such group, a few times over while it is encoded, so this bounds the Python worker's peak whatever
the round's size (16 MiB put ~45 MB more on a task's peak at 50,000-record rounds than at 15,000)."""

STALE_TEMP_S = 24 * 3600
"""Temporary files of writers that died are deleted by recovery once they are this old."""


class _PartWriter:
    """One partition's hidden temporary file of a round, written a row group at a time."""

    def __init__(self, filesystem: Any, directory: str) -> None:
        import pyarrow.parquet as pq

        self.filesystem = filesystem
        self.tmp = f"{directory}/.tmp-{uuid.uuid4().hex}.parquet"
        self.writer: Any = pq.ParquetWriter(self.tmp, CHANGE_SCHEMA, filesystem=filesystem)
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending))
            self.pending, self.pending_bytes = [], 0

    def finish(self, staged: str) -> None:
        self.flush()
        self.writer.close()
        self.writer = None
        self.filesystem.move(self.tmp, staged)  # atomic rename on local and HDFS filesystems

    def discard(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None
        with contextlib.suppress(OSError):
            self.filesystem.delete_file(self.tmp)


class _ParquetWriter:
    """Streams a round's records of one channel into hidden temporary files (one per partition touched, a row
    group every ``ROW_GROUP_BYTES``) and stages them on close."""

    def __init__(self, path: str, channel_id: str, start_token: str, sequence: int, partition_by: str) -> None:
        self._path = path
        self._channel_id = channel_id
        self._chunk = chunk_id(start_token)
        self._start_token = start_token
        self._sequence = sequence
        self._partition_by = partition_by
        self._count = 0
        self._parts: dict[str, _PartWriter] = {}
        self._filesystem: Any = None
        self._directory = ""
        self.refused = 0

    def _part(self, partition: str) -> _PartWriter:
        part = self._parts.get(partition)
        if part is None:
            if self._filesystem is None:
                filesystem, base = filesystem_of(self._path)
                self._directory = staging_dir(base, self._channel_id)
                filesystem.create_dir(self._directory, recursive=True)
                self._filesystem = filesystem
            part = self._parts[partition] = _PartWriter(self._filesystem, self._directory)
        return part

    def write(self, records: Records) -> None:
        if not records:
            return
        try:
            tables = self._split_table(records_to_arrow(records, self._channel_id, self._chunk, self._count))
            for partition, table in tables:
                self._count += table.num_rows
                part = self._part(partition)
                part.pending.append(table)
                part.pending_bytes += table.nbytes
                if part.pending_bytes >= ROW_GROUP_BYTES:
                    part.flush()
        except BaseException:
            self.abort()
            raise

    def _split_table(self, table: pa.Table) -> list[tuple[str, pa.Table]]:
        """Consecutive runs of a change-log table's rows by partition, from its sequence column (in order:
        record_index stays the position in the round)."""
        if self._partition_by == "none":
            return [(NO_PARTITION, table)]
        stamps = table.column("sequence_timestamp_us")
        step = int(interval_step(self._partition_by).total_seconds()) * 1_000_000
        keys = stamps.fill_null(0).to_numpy() // step  # floor division: the UTC hour or day, as partition_of
        keys[~stamps.is_valid().to_numpy(zero_copy_only=False)] = np.iinfo(np.int64).min  # base data
        starts = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()]
        ends = [*starts[1:], table.num_rows]
        return [(partition_of(stamps[a].as_py(), self._partition_by), table.slice(a, b - a))
                for a, b in zip(starts, ends, strict=True)]

    def abort(self) -> None:
        for part in self._parts.values():
            part.discard()
        self._parts = {}

    def close(self, end_token: str) -> int:
        try:
            for partition, part in self._parts.items():
                name = staged_name(self._sequence, self._start_token, end_token, partition)
                part.finish(f"{self._directory}/{name}")
        except BaseException:
            self.abort()
            raise
        return self._count


@dataclass(frozen=True)
class ParquetSink:
    """A Parquet change log under ``path`` (local path or a URI pyarrow understands: ``s3://``, ``hdfs://``),
    partitioned by commit time when ``partition_by`` is ``hour`` or ``day``."""

    path: str
    partition_by: str = "none"

    def describe(self) -> str:
        how = "" if self.partition_by == "none" else f", partitioned by commit {self.partition_by}"
        return f"parquet change log at {self.path}{how}"

    def check(self) -> None:
        if self.partition_by not in PARTITIONINGS:
            raise TablestoreClientError(f"partition_by must be one of {', '.join(PARTITIONINGS)}")
        try:
            filesystem, base = filesystem_of(self.path)
            filesystem.create_dir(base, recursive=True)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise TablestoreClientError(f"cannot use parquet sink path {self.path}: {exc}") from None

    def open(self, channel_id: str, start_token: str, sequence: int) -> _ParquetWriter:
        return _ParquetWriter(self.path, channel_id, start_token, sequence, self.partition_by)

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        """Move the round's staged files into the change log (idempotent: published files stay)."""
        filesystem, base = filesystem_of(self.path)
        wanted = (sequence, chunk_id(start_token), chunk_id(end_token))
        staged = self._staged(filesystem, base, channel_id)
        mine = [(info, parsed) for info, parsed in staged if parsed[:3] == wanted]
        if not mine and not self._published_any(filesystem, base, channel_id, chunk_id(start_token)):
            raise TablestoreClientError(f"the staged change-log files of channel {channel_id}'s committed round "
                                        f"(sequence {sequence}) are missing from {staging_dir(base, channel_id)}")
        for info, (_, start_chunk, _, partition) in mine:
            self._move(filesystem, info.path, published_path(base, channel_id, start_chunk, partition))

    @staticmethod
    def _staged(filesystem: Any, base: str, channel_id: str) -> list[tuple[Any, tuple[int, str, str, str]]]:
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(staging_dir(base, channel_id), allow_not_found=True)
        out = []
        for info in filesystem.get_file_info(selector):
            parsed = parse_staged(info.base_name)
            if parsed is not None:
                out.append((info, parsed))
        return out

    def _published_any(self, filesystem: Any, base: str, channel_id: str, start_chunk: str) -> bool:
        """Whether some partition already holds the round starting at ``start_chunk`` (published before)."""
        from pyarrow import fs as pafs

        name = f"channel={safe_name(channel_id)}/part-{start_chunk}.parquet"
        if self.partition_by == "none":
            return bool(filesystem.get_file_info(f"{base}/{name}").type == pafs.FileType.File)
        selector = pafs.FileSelector(base, allow_not_found=True)
        return any(filesystem.get_file_info(f"{info.path}/{name}").type == pafs.FileType.File
                   for info in filesystem.get_file_info(selector) if info.base_name.startswith("interval="))

    @staticmethod
    def _move(filesystem: Any, staged: str, final: str) -> None:
        filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
        filesystem.move(staged, final)

    def recover(self, channel_id: str, token: str, sequence: int) -> None:
        filesystem, base = filesystem_of(self.path)
        committed_end = chunk_id(token)
        now = time.time()
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(staging_dir(base, channel_id), allow_not_found=True)
        for info in filesystem.get_file_info(selector):
            if info.base_name.startswith(".tmp-"):
                mtime = info.mtime.timestamp() if info.mtime is not None else now
                if now - mtime > STALE_TEMP_S:
                    with contextlib.suppress(OSError):
                        filesystem.delete_file(info.path)
                continue
            parsed = parse_staged(info.base_name)
            if parsed is None:
                continue
            staged_seq, start_chunk, end_chunk, partition = parsed
            if staged_seq == sequence and end_chunk == committed_end:
                log.info("publishing %s of channel %s: its checkpoint was stored by a run that stopped before "
                         "publishing it", info.base_name, channel_id)
                self._move(filesystem, info.path, published_path(base, channel_id, start_chunk, partition))
            elif staged_seq <= sequence:
                with contextlib.suppress(OSError):
                    filesystem.delete_file(info.path)  # a round that was never (and can no longer be) committed

    def staged_channels(self) -> list[str]:
        """Channel ids with staged output."""
        from pyarrow import fs as pafs

        filesystem, base = filesystem_of(self.path)
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

    filesystem, base = filesystem_of(path)
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
