"""The change log's layout, shared by the Parquet sink and the Airflow operators: names, partitions, and that it
needs neither Spark nor numpy (the rebuild's swap, which touches file systems, is tested with the sink)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from airflow_tablestore.client import changelog


def test_importing_the_layout_loads_no_spark_numpy_or_pyarrow() -> None:
    code = ("import sys, airflow_tablestore.client.changelog\n"
            "print(sorted(m for m in ('pyspark', 'numpy', 'pyarrow') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("stamp", "partition_by", "expected"), [
    (None, "hour", "base"),
    (None, "none", "all"),
    (int(datetime(2026, 11, 23, 12, 59, tzinfo=UTC).timestamp() * 1e6), "hour", "20261123T12"),
    (int(datetime(2026, 11, 23, 12, 59, tzinfo=UTC).timestamp() * 1e6), "day", "20261123"),
])
def test_a_change_goes_to_the_partition_of_its_commit_time(stamp: int | None, partition_by: str,
                                                           expected: str) -> None:
    assert changelog.partition_of(stamp, partition_by) == expected


def test_intervals_align_to_whole_partitions() -> None:
    start, end = datetime(2026, 11, 23, 11, tzinfo=UTC), datetime(2026, 11, 23, 13, tzinfo=UTC)
    assert changelog.aligned(start, end, "hour")
    assert not changelog.aligned(start.replace(minute=30), end, "hour")
    assert not changelog.aligned(start, end, "day")
    assert changelog.interval_partitions(start.replace(minute=30), end, "hour") == ["20261123T11", "20261123T12"]


def test_a_staged_name_reads_back() -> None:
    name = changelog.staged_name(42, "start", "end", "20261123T11")
    assert changelog.parse_staged(name) == (42, changelog.chunk_id("start"), changelog.chunk_id("end"),
                                            "20261123T11")
    assert changelog.parse_staged(".tmp-abc.parquet") is None


def test_published_and_staging_paths() -> None:
    assert changelog.chunk_path("/log", "a/b", "tok") == \
        f"/log/channel=a%2Fb/part-{changelog.chunk_id('tok')}.parquet"
    assert changelog.published_path("/log", "c", "x", "20261123") == "/log/interval=20261123/channel=c/part-x.parquet"
    assert changelog.staging_dir("/log", "c") == f"/log/{changelog.STAGING}/channel=c"
