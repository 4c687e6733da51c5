"""Parquet change-log sink: deterministic names per (channel, start token), replay overwrites, no temp leftovers."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import ActionType, Column, Record, SequenceInfo
from airflow_tablestore.spark.changes import arrow_to_records
from airflow_tablestore.spark.sinks import ParquetSink, chunk_path, read_change_log, safe_name


def _recs(start: int, n: int) -> list[Record]:
    return [
        Record(ActionType.PUT_ROW, (("id", i),), (Column("v", f"x{i}", 1000 + i),), SequenceInfo(0, 10 + i, 0))
        for i in range(start, start + n)
    ]


def test_writes_one_file_per_channel_and_start_token(tmp_path: Path) -> None:
    sink = ParquetSink(str(tmp_path / "log"))
    sink.check()
    w = sink.open("0_1", "token-A")
    w.write(_recs(0, 3))
    w.write(_recs(3, 2))
    assert w.close() == 5
    w = sink.open("0_1", "token-B")
    w.write(_recs(5, 1))
    assert w.close() == 1
    files = sorted(p.relative_to(tmp_path / "log").as_posix() for p in (tmp_path / "log").rglob("*") if p.is_file())
    assert len(files) == 2 and all(f.startswith("channel=0_1/part-") for f in files)
    assert chunk_path(str(tmp_path / "log"), "0_1", "token-A").endswith(files[0]) or \
        chunk_path(str(tmp_path / "log"), "0_1", "token-A").endswith(files[1])
    got = arrow_to_records(read_change_log(str(tmp_path / "log")))
    assert sorted(r.primary_key for r in got) == sorted(r.primary_key for r in _recs(0, 6))


def test_replaying_a_start_token_overwrites(tmp_path: Path) -> None:
    sink = ParquetSink(str(tmp_path))
    for n in (3, 4):  # a replay from the same token may read further: it replaces the first file
        w = sink.open("ch", "same-token")
        w.write(_recs(0, n))
        w.close()
    table = read_change_log(str(tmp_path))
    assert table.num_rows == 4
    assert arrow_to_records(table) == _recs(0, 4)
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_empty_round_writes_nothing(tmp_path: Path) -> None:
    w = ParquetSink(str(tmp_path)).open("ch", "t")
    assert w.close() == 0
    assert read_change_log(str(tmp_path)).num_rows == 0
    assert not list(tmp_path.rglob("*.parquet"))


def test_channel_ids_become_safe_directory_names() -> None:
    assert safe_name("a/b c") == "a%2Fb%20c"
    assert safe_name("BaseData_3") == "BaseData_3"


def test_unusable_path_fails_fast(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TablestoreClientError, match="parquet sink path"):
        ParquetSink(str(blocker / "sub")).check()


def test_records_stream_to_disk_in_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory holds at most a row group's worth, not the round: once ROW_GROUP_BYTES are buffered they go to
    the (hidden) temporary file as a row group."""
    import pyarrow.parquet as pq

    from airflow_tablestore.spark import sinks

    monkeypatch.setattr(sinks, "ROW_GROUP_BYTES", 1)  # every write fills a row group
    sink = ParquetSink(str(tmp_path))
    w = sink.open("ch", "token")
    w.write(_recs(0, 3))
    hidden = [p for p in tmp_path.rglob(".tmp-*.parquet")]
    assert len(hidden) == 1 and not list(tmp_path.rglob("part-*.parquet"))  # invisible until closed
    w.write(_recs(3, 4))
    assert w.close() == 7
    (final,) = list(tmp_path.rglob("part-*.parquet"))
    assert pq.ParquetFile(final).num_row_groups == 2
    assert not list(tmp_path.rglob(".tmp-*"))
