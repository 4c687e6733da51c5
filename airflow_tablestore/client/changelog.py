"""The Parquet change log's layout: file and partition names, staging, the rebuild's swap (no Spark, no numpy).

The Spark consumer's Parquet sink (:mod:`airflow_tablestore.spark.sinks.parquet`) writes by these rules and the
Airflow operators that plan and swap rebuilt intervals (:mod:`airflow_tablestore.operators.replication`,
:mod:`airflow_tablestore.operators.rebuild`) read them, so they live here, where both reach. Under the change
log's path (readers skip ``_``/``.`` names, as Spark and pyarrow datasets do)::

    [interval=<P>/]channel=<id>/part-<hash(start token)>.parquet     published: the committed chain of rounds
    _staging/channel=<id>/<seq>-<hash(start)>-<hash(end)>.<P>.parquet  a finished round awaiting its checkpoint
    _staging/channel=<id>/.tmp-<uuid>.parquet                        a round being written

With ``partition_by`` ``hour`` or ``day`` each change goes to the ``interval=`` partition of its commit time
(UTC; ``YYYYMMDDTHH`` or ``YYYYMMDD``; base data in ``interval=base``). File systems (local paths or URIs such
as ``s3://``, ``hdfs://``) are pyarrow's, imported when a function touches one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_tablestore.client.epoch import datetime_to_us, us_to_datetime

log = logging.getLogger(__name__)

STAGING = "_staging"
PARTITIONINGS = ("none", "hour", "day")
NO_PARTITION = "all"
"""The partition name of every change when the log is not partitioned (used in staged names only)."""
BASE_PARTITION = "base"


def chunk_id(token: str) -> str:
    """Stable short id of a token (names Parquet files, tags change-log rows with the round's start)."""
    return hashlib.sha1(token.encode()).hexdigest()[:20]


def safe_name(channel_id: str) -> str:
    """A channel id usable as a directory name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "%" + format(ord(ch), "02X") for ch in channel_id)


def chunk_path(base: str, channel_id: str, start_token: str, partition: str = NO_PARTITION) -> str:
    """The published file of one (channel, start token[, partition])."""
    return published_path(base, channel_id, chunk_id(start_token), partition)


def published_path(base: str, channel_id: str, start_chunk: str, partition: str) -> str:
    """The published file of the round starting at chunk ``start_chunk`` in ``partition``."""
    where = base if partition == NO_PARTITION else f"{base}/interval={partition}"
    return f"{where}/channel={safe_name(channel_id)}/part-{start_chunk}.parquet"


def staging_dir(base: str, channel_id: str) -> str:
    """Where a channel's rounds are staged."""
    return f"{base}/{STAGING}/channel={safe_name(channel_id)}"


def staged_name(sequence: int, start_token: str, end_token: str, partition: str = NO_PARTITION) -> str:
    """File name of a finished, unpublished round's part in one partition (sequence first: recovery compares
    it numerically)."""
    return f"{sequence:012d}-{chunk_id(start_token)}-{chunk_id(end_token)}.{partition}.parquet"


def parse_staged(name: str) -> tuple[int, str, str, str] | None:
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


def interval_step(partition_by: str) -> timedelta:
    """The length of one partition (an hour or a day)."""
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
        moment += interval_step(partition_by)
    return out


def filesystem_of(path: str) -> tuple[Any, str]:
    """The pyarrow file system of ``path`` and the path inside it (no trailing slash)."""
    from pyarrow import fs as pafs

    if "://" not in path:
        path = os.path.abspath(path)
    filesystem, base = pafs.FileSystem.from_uri(path)
    return filesystem, base.rstrip("/")


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

    filesystem, base = filesystem_of(rebuilt)
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

    filesystem, base = filesystem_of(path)
    _, rebuilt_base = filesystem_of(rebuilt)
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
