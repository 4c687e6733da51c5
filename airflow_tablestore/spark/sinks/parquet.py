"""The Parquet change-log sink: one file per committed round, staged until its checkpoint is stored.

Layout under the sink path (readers skip ``_``/``.`` names, as Spark and pyarrow datasets do)::

    [interval=<P>/]channel=<id>/part-<hash(start token)>.parquet     published: the committed chain of rounds
    _staging/channel=<id>/<seq>-<hash(start)>-<hash(end)>.<P>.parquet  a finished round awaiting its checkpoint
    _staging/channel=<id>/.tmp-<uuid>.parquet                        a round being written

With ``partition_by`` ``hour`` or ``day`` each change goes to the ``interval=`` partition of its commit time
(UTC; ``YYYYMMDDTHH`` or ``YYYYMMDD``; base data in ``interval=base``), so once the stream is consumed past
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
import hashlib
import logging
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa

from airflow_tablestore.client.epoch import datetime_to_us, us_to_datetime
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.records import Records
from airflow_tablestore.spark.changes import CHANGE_SCHEMA, records_to_arrow

log = logging.getLogger(__name__)

ROW_GROUP_BYTES = 16 * 1024 * 1024
"""Records are buffered up to about this many (Arrow) bytes, then written as one row group."""

STAGING = "_staging"
PARTITIONINGS = ("none", "hour", "day")
NO_PARTITION = "all"
"""The partition name of every change when the log is not partitioned (used in staged names only)."""
BASE_PARTITION = "base"
STALE_TEMP_S = 24 * 3600
"""Temporary files of writers that died are deleted by recovery once they are this old."""


def chunk_id(token: str) -> str:
    """Stable short id of a token (names Parquet files, tags change-log rows with the round's start)."""
    return hashlib.sha1(token.encode()).hexdigest()[:20]


def safe_name(channel_id: str) -> str:
    """A channel id usable as a directory name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "%" + format(ord(ch), "02X") for ch in channel_id)


def chunk_path(base: str, channel_id: str, start_token: str, partition: str = NO_PARTITION) -> str:
    """The published file of one (channel, start token[, partition])."""
    return _published(base, channel_id, chunk_id(start_token), partition)


def _published(base: str, channel_id: str, start_chunk: str, partition: str) -> str:
    where = base if partition == NO_PARTITION else f"{base}/interval={partition}"
    return f"{where}/channel={safe_name(channel_id)}/part-{start_chunk}.parquet"


def _staging_dir(base: str, channel_id: str) -> str:
    return f"{base}/{STAGING}/channel={safe_name(channel_id)}"


def staged_name(sequence: int, start_token: str, end_token: str, partition: str = NO_PARTITION) -> str:
    """File name of a finished, unpublished round's part in one partition (sequence first: recovery compares
    it numerically)."""
    return f"{sequence:012d}-{chunk_id(start_token)}-{chunk_id(end_token)}.{partition}.parquet"


def _parse_staged(name: str) -> tuple[int, str, str, str] | None:
    """(sequence, start chunk, end chunk, partition) of a staged file name, None for anything else."""
    stem, _, partition = name.removesuffix(".parquet").partition(".")
    parts = stem.split("-")
    if len(parts) != 3 or not parts[0].isdigit() or not partition:
        return None
    return int(parts[0]), parts[1], parts[2], partition


def partition_of(sequence_timestamp_us: int | None, partition_by: str) -> str:
    """The ``interval=`` value of a change committed at ``sequence_timestamp_us`` (None: base data)."""
    if partition_by == "none":
        return NO_PARTITION
    if sequence_timestamp_us is None:
        return BASE_PARTITION
    moment = us_to_datetime(sequence_timestamp_us)
    return moment.strftime("%Y%m%dT%H" if partition_by == "hour" else "%Y%m%d")


def _step(partition_by: str) -> timedelta:
    return timedelta(hours=1) if partition_by == "hour" else timedelta(days=1)


def _floor(moment: datetime, partition_by: str) -> datetime:
    moment = moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return moment if partition_by == "hour" else moment.replace(hour=0)


def aligned(start: datetime, end: datetime, partition_by: str) -> bool:
    """Whether [start, end) is made of whole partitions."""
    return _floor(start, partition_by) == start.astimezone(UTC) and _floor(end, partition_by) == end.astimezone(UTC)


def interval_partitions(start: datetime, end: datetime, partition_by: str) -> list[str]:
    """The partitions overlapping the interval [start, end)."""
    out, moment = [], _floor(start, partition_by)
    while moment < end:
        out.append(partition_of(datetime_to_us(moment), partition_by))
        moment += _step(partition_by)
    return out


def _filesystem(path: str) -> tuple[Any, str]:
    from pyarrow import fs as pafs

    if "://" not in path:
        path = os.path.abspath(path)
    filesystem, base = pafs.FileSystem.from_uri(path)
    return filesystem, base.rstrip("/")


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
                filesystem, base = _filesystem(self._path)
                self._directory = _staging_dir(base, self._channel_id)
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
        step = int(_step(self._partition_by).total_seconds()) * 1_000_000
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
            filesystem, base = _filesystem(self.path)
            filesystem.create_dir(base, recursive=True)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise TablestoreClientError(f"cannot use parquet sink path {self.path}: {exc}") from None

    def open(self, channel_id: str, start_token: str, sequence: int) -> _ParquetWriter:
        return _ParquetWriter(self.path, channel_id, start_token, sequence, self.partition_by)

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        """Move the round's staged files into the change log (idempotent: published files stay)."""
        filesystem, base = _filesystem(self.path)
        wanted = (sequence, chunk_id(start_token), chunk_id(end_token))
        staged = self._staged(filesystem, base, channel_id)
        mine = [(info, parsed) for info, parsed in staged if parsed[:3] == wanted]
        if not mine and not self._published_any(filesystem, base, channel_id, chunk_id(start_token)):
            raise TablestoreClientError(f"the staged change-log files of channel {channel_id}'s committed round "
                                        f"(sequence {sequence}) are missing from {_staging_dir(base, channel_id)}")
        for info, (_, start_chunk, _, partition) in mine:
            self._move(filesystem, info.path, _published(base, channel_id, start_chunk, partition))

    @staticmethod
    def _staged(filesystem: Any, base: str, channel_id: str) -> list[tuple[Any, tuple[int, str, str, str]]]:
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(_staging_dir(base, channel_id), allow_not_found=True)
        out = []
        for info in filesystem.get_file_info(selector):
            parsed = _parse_staged(info.base_name)
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
        filesystem, base = _filesystem(self.path)
        committed_end = chunk_id(token)
        now = time.time()
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(_staging_dir(base, channel_id), allow_not_found=True)
        for info in filesystem.get_file_info(selector):
            if info.base_name.startswith(".tmp-"):
                mtime = info.mtime.timestamp() if info.mtime is not None else now
                if now - mtime > STALE_TEMP_S:
                    with contextlib.suppress(OSError):
                        filesystem.delete_file(info.path)
                continue
            parsed = _parse_staged(info.base_name)
            if parsed is None:
                continue
            staged_seq, start_chunk, end_chunk, partition = parsed
            if staged_seq == sequence and end_chunk == committed_end:
                log.info("publishing %s of channel %s: its checkpoint was stored by a run that stopped before "
                         "publishing it", info.base_name, channel_id)
                self._move(filesystem, info.path, _published(base, channel_id, start_chunk, partition))
            elif staged_seq <= sequence:
                with contextlib.suppress(OSError):
                    filesystem.delete_file(info.path)  # a round that was never (and can no longer be) committed

    def staged_channels(self) -> list[str]:
        """Channel ids with staged output."""
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


REBUILD_PENDING = "_REBUILD_PENDING"
"""Marker at the root of a rebuild's staging change log (:func:`prepare_rebuild`): not swapped in yet."""
REBUILD_SWAPPING = "_REBUILD_SWAPPING"
"""The marker once every partition of the interval is staged (an empty directory for one without changes): a
partition then missing from the staging log was swapped in by an earlier attempt."""


def prepare_rebuild(rebuilt: str) -> None:
    """Start a rebuild's staging change log afresh: delete what an earlier attempt staged there, create it and
    mark it :data:`REBUILD_PENDING`, so :func:`replace_partitions` can tell "not swapped yet" (marker present,
    even when the rebuild writes nothing) from "already swapped" (marker gone)."""
    from pyarrow import fs as pafs

    filesystem, base = _filesystem(rebuilt)
    if filesystem.get_file_info(base).type != pafs.FileType.NotFound:
        filesystem.delete_dir(base)
    filesystem.create_dir(base, recursive=True)
    with filesystem.open_output_stream(f"{base}/{REBUILD_PENDING}") as marker:
        marker.write(b"")


def replace_partitions(path: str, rebuilt: str, start: datetime, end: datetime, partition_by: str) -> list[str]:
    """Swap the ``interval=`` partitions of [start, end) under ``path`` for those under ``rebuilt`` (a change
    log :func:`prepare_rebuild` marked and the rebuild wrote; a partition it did not write means the interval
    had no changes there), then delete ``rebuilt``. Each swap renames the old directory aside, the new one into
    place, and deletes the old one: on local and HDFS file systems readers see the old or the new partition,
    never a mix. Returns the partitions.

    Idempotent, so a retried task never swaps in what is left after an earlier attempt: without a marker under
    ``rebuilt`` the interval was already swapped and nothing changes; with :data:`REBUILD_SWAPPING` an attempt
    stopped half-way and the partitions still staged are swapped in."""
    from pyarrow import fs as pafs

    filesystem, base = _filesystem(path)
    _, rebuilt_base = _filesystem(rebuilt)
    partitions = interval_partitions(start, end, partition_by)
    pending, swapping = f"{rebuilt_base}/{REBUILD_PENDING}", f"{rebuilt_base}/{REBUILD_SWAPPING}"

    def exists(where: str, kind: Any) -> bool:
        return bool(filesystem.get_file_info(where).type == kind)

    if exists(pending, pafs.FileType.File):
        for partition in partitions:  # a partition the rebuild did not write had no changes: swap in an empty one
            filesystem.create_dir(f"{rebuilt_base}/interval={partition}", recursive=True)
        filesystem.move(pending, swapping)
    if exists(swapping, pafs.FileType.File):
        filesystem.create_dir(f"{base}/_replaced", recursive=True)
        for partition in partitions:
            final = f"{base}/interval={partition}"
            fresh = f"{rebuilt_base}/interval={partition}"
            aside = f"{base}/_replaced/{partition}"
            if exists(fresh, pafs.FileType.Directory):  # else swapped in by an earlier attempt
                if exists(final, pafs.FileType.Directory):
                    if exists(aside, pafs.FileType.Directory):
                        filesystem.delete_dir(aside)  # left by an earlier swap of this partition
                    filesystem.move(final, aside)
                filesystem.move(fresh, final)
            if exists(aside, pafs.FileType.Directory):
                filesystem.delete_dir(aside)
        filesystem.delete_file(swapping)  # the swap is complete
    else:
        log.info("%s holds no rebuild to swap in: the interval was swapped already", rebuilt)
    if not exists(rebuilt_base, pafs.FileType.NotFound):
        filesystem.delete_dir(rebuilt_base)
    for leftover in (f"{base}/_replaced", f"{base}/_rebuild"):  # remove the (now empty) work directories
        with contextlib.suppress(OSError):
            if not filesystem.get_file_info(pafs.FileSelector(leftover, allow_not_found=True)):
                filesystem.delete_dir(leftover)
    return partitions


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
