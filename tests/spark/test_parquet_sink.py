"""Parquet change-log sink: rounds are staged per (sequence, start, end) and published only once their
checkpoint is stored; recovery publishes exactly the committed round and drops the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablestore.client import changelog
from airflow_tablestore.client.changelog import chunk_path, safe_name
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import ActionType, Column, Record, SequenceInfo
from airflow_tablestore.spark.arrow.changes import arrow_to_records
from airflow_tablestore.spark.sinks import parquet as parquet_sink
from airflow_tablestore.spark.sinks.parquet import ParquetSink, read_change_log
from spark.arrow.test_arrow_straight import encoded  # the sink takes a ReadRecords answer: the records as bytes


def _recs(start: int, n: int) -> list[Record]:
    return [
        Record(ActionType.PUT_ROW, (("id", i),), (Column("v", f"x{i}", 1000 + i),), SequenceInfo(0, 10 + i, 0))
        for i in range(start, start + n)
    ]


def _round(sink: ParquetSink, channel: str, start: str, end: str, seq: int, records: list[Record]) -> int:
    writer = sink.open(channel, start, seq)
    writer.write(encoded(records))
    return writer.close(end)


def _published(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts))


def test_a_round_is_invisible_until_published(tmp_path: Path) -> None:
    sink = ParquetSink(str(tmp_path / "log"))
    sink.check()
    assert _round(sink, "0_1", "token-A", "token-B", 1, _recs(0, 5)) == 5
    assert read_change_log(str(tmp_path / "log")).num_rows == 0  # staged only
    assert sink.staged_channels() == ["0_1"]
    sink.publish("0_1", "token-A", "token-B", 1)
    assert _round(sink, "0_1", "token-B", "token-C", 2, _recs(5, 1)) == 1
    sink.publish("0_1", "token-B", "token-C", 2)
    files = _published(tmp_path / "log")
    assert files == sorted(p.removeprefix(str(tmp_path / "log") + "/") for p in (
        chunk_path(str(tmp_path / "log"), "0_1", "token-A"), chunk_path(str(tmp_path / "log"), "0_1", "token-B")))
    got = arrow_to_records(read_change_log(str(tmp_path / "log")))
    assert sorted(got, key=lambda r: r.primary_key) == _recs(0, 6)
    assert sink.staged_channels() == []
    sink.publish("0_1", "token-B", "token-C", 2)  # publishing again is harmless


def test_recovery_publishes_only_the_committed_round(tmp_path: Path) -> None:
    """A stale driver read [A, C) in one round while the new owner read [A, B) and [B, C) (sequences 6 and 7)
    and died after checkpointing C: recovery publishes [B, C) (sequence 7) and never the stale [A, C),
    which has the stored sequence's predecessor and would duplicate [A, B)."""
    sink = ParquetSink(str(tmp_path))
    _round(sink, "ch", "A", "C", 6, _recs(0, 8))     # stale driver, never committed
    _round(sink, "ch", "A", "B", 6, _recs(0, 3))     # new owner, committed with sequence 6 ...
    sink.publish("ch", "A", "B", 6)                  # ... and published
    _round(sink, "ch", "B", "C", 7, _recs(3, 5))     # committed with sequence 7, then the driver died
    _round(sink, "ch", "C", "D", 8, _recs(8, 2))     # a live round of someone else, not yet committed
    sink.recover("ch", "C", 7)
    got = arrow_to_records(read_change_log(str(tmp_path)))
    assert sorted(got, key=lambda r: r.primary_key) == _recs(0, 8)  # exactly once each
    staged = sorted(p.name for p in (tmp_path / "_staging").rglob("*.parquet"))
    assert staged == [changelog.staged_name(8, "C", "D")]  # seq > stored: may still be committed
    sink.recover("ch", "C", 7)
    assert read_change_log(str(tmp_path)).num_rows == 8


def test_a_round_that_never_committed_is_dropped(tmp_path: Path) -> None:
    sink = ParquetSink(str(tmp_path))
    _round(sink, "ch", "A", "B", 3, _recs(0, 3))
    sink.recover("ch", "A", 3)  # the checkpoint stayed at A (sequence 3): the round's checkpoint failed
    assert read_change_log(str(tmp_path)).num_rows == 0
    assert not list((tmp_path / "_staging").rglob("*.parquet"))


def test_publishing_a_lost_staged_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TablestoreClientError, match="staged change-log file"):
        ParquetSink(str(tmp_path)).publish("ch", "A", "B", 1)


def test_empty_round_writes_nothing(tmp_path: Path) -> None:
    assert ParquetSink(str(tmp_path)).open("ch", "t", 1).close("t") == 0
    assert not list(tmp_path.rglob("*.parquet"))


def test_abort_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_BYTES", 1)
    writer = ParquetSink(str(tmp_path)).open("ch", "t", 1)
    writer.write(encoded(_recs(0, 3)))
    assert list(tmp_path.rglob(".tmp-*"))
    writer.abort()
    assert not list(tmp_path.rglob("*.parquet"))


def test_channel_ids_become_safe_directory_names(tmp_path: Path) -> None:
    assert safe_name("a/b c") == "a%2Fb%20c"
    assert safe_name("BaseData_3") == "BaseData_3"
    sink = ParquetSink(str(tmp_path))
    _round(sink, "a/b c", "A", "B", 1, _recs(0, 1))
    assert sink.staged_channels() == ["a/b c"]  # back to the channel id the tunnel knows


def test_unusable_path_fails_fast(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TablestoreClientError, match="parquet sink path"):
        ParquetSink(str(blocker / "sub")).check()


def test_records_stream_to_disk_in_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory holds at most a row group's worth, not the round: once ROW_GROUP_BYTES are buffered they go to
    the (hidden) temporary file as a row group."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(parquet_sink, "ROW_GROUP_BYTES", 1)  # every write fills a row group
    sink = ParquetSink(str(tmp_path))
    w = sink.open("ch", "token", 1)
    w.write(encoded(_recs(0, 3)))
    hidden = [p for p in tmp_path.rglob(".tmp-*.parquet")]
    assert len(hidden) == 1 and not list(tmp_path.rglob("part-*.parquet"))  # invisible until published
    w.write(encoded(_recs(3, 4)))
    assert w.close("next") == 7
    sink.publish("ch", "token", "next", 1)
    (final,) = list(tmp_path.rglob("part-*.parquet"))
    assert pq.ParquetFile(final).num_row_groups == 2
    assert not list(tmp_path.rglob(".tmp-*"))


def _at(us: int, i: int) -> Record:
    return Record(ActionType.PUT_ROW, (("id", i),), (Column("v", i, 1),), SequenceInfo(0, us, 0))


def test_partitioned_by_commit_hour(tmp_path: Path) -> None:
    """A round that spans 12:59 → 13:01 (and base data) lands in one file per partition; each partition holds
    exactly the changes committed in its hour."""
    from datetime import UTC, datetime

    h12 = int(datetime(2026, 11, 23, 12, 59, tzinfo=UTC).timestamp() * 1e6)
    h13 = int(datetime(2026, 11, 23, 13, 1, tzinfo=UTC).timestamp() * 1e6)
    sink = ParquetSink(str(tmp_path), partition_by="hour")
    sink.check()
    base = Record(ActionType.PUT_ROW, (("id", 0),), (Column("v", 0, 1),))
    records = [base, _at(h12, 1), _at(h12 + 5, 2), _at(h13, 3)]
    assert _round(sink, "ch", "A", "B", 1, records) == 4
    sink.publish("ch", "A", "B", 1)
    assert _published(tmp_path) == sorted(
        f"interval={p}/channel=ch/part-{changelog.chunk_id('A')}.parquet"
        for p in ("base", "20261123T12", "20261123T13"))
    assert [r.primary_key for r in arrow_to_records(read_change_log(str(tmp_path / "interval=20261123T12")))] == \
        [(("id", 1),), (("id", 2),)]
    assert changelog.interval_partitions(datetime(2026, 11, 23, 12, tzinfo=UTC),
                                         datetime(2026, 11, 23, 14, tzinfo=UTC), "hour") == [
        "20261123T12", "20261123T13"]
    # positions in the round are kept across partitions
    assert sorted(read_change_log(str(tmp_path)).column("record_index").to_pylist()) == [0, 1, 2, 3]


def test_partitioned_recovery_publishes_every_part(tmp_path: Path) -> None:
    h = int(datetime_at(2026, 11, 23, 12) * 1e6)
    sink = ParquetSink(str(tmp_path), partition_by="hour")
    _round(sink, "ch", "A", "B", 4, [_at(h, 1), _at(h + 3_600_000_000, 2)])
    sink.recover("ch", "B", 4)  # the checkpoint landed, the run died before publishing
    assert read_change_log(str(tmp_path)).num_rows == 2
    assert len(_published(tmp_path)) == 2


def datetime_at(*args: int) -> float:
    from datetime import UTC, datetime

    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[arg-type,misc]


def test_replace_partitions_swaps_whole_partitions(tmp_path: Path) -> None:
    """A rebuilt interval replaces its partitions wholesale (a stray file goes), partitions outside the interval
    stay, an hour the rebuild found no change in becomes empty, and the work directories are removed."""
    from datetime import UTC, datetime

    log = tmp_path / "log"
    h12 = int(datetime(2026, 11, 23, 12, 30, tzinfo=UTC).timestamp() * 1e6)
    old = ParquetSink(str(log), partition_by="hour")
    _round(old, "ch", "A", "B", 1, [_at(h12, 1), _at(h12 + 3_600_000_000, 2)])  # 12:30 and 13:30
    old.publish("ch", "A", "B", 1)
    (log / "interval=20261123T12" / "stray.parquet").write_bytes(b"not parquet")
    changelog.prepare_rebuild(str(log / "_rebuild" / "x"))
    rebuilt = ParquetSink(str(log / "_rebuild" / "x"), partition_by="hour")
    _round(rebuilt, "other", "C", "D", 1, [_at(h12 + 1, 7)])
    rebuilt.publish("other", "C", "D", 1)
    swapped = changelog.replace_partitions(str(log), str(log / "_rebuild" / "x"),
                                           datetime(2026, 11, 23, 11, tzinfo=UTC),
                                           datetime(2026, 11, 23, 13, tzinfo=UTC), "hour")
    assert swapped == ["20261123T11", "20261123T12"]
    assert [r.primary_key for r in arrow_to_records(read_change_log(str(log / "interval=20261123T12")))] == \
        [(("id", 7),)]
    assert not (log / "interval=20261123T12" / "stray.parquet").exists()
    assert (log / "interval=20261123T11").is_dir() and not any((log / "interval=20261123T11").iterdir())
    assert read_change_log(str(log / "interval=20261123T13")).num_rows == 1  # outside the interval: kept
    assert not (log / "_rebuild").exists() and not (log / "_replaced").exists()


def test_replace_partitions_resumes_a_swap_that_stopped_half_way(tmp_path: Path) -> None:
    """An attempt that stopped after swapping in one partition: the retry swaps in the rest and leaves the
    swapped one alone (a partition missing from the staging log is not "an hour without changes" then)."""
    from datetime import UTC, datetime

    log, rebuilt = tmp_path / "log", tmp_path / "log" / "_rebuild" / "x"
    for hour in ("11", "12"):
        (log / f"interval=20261123T{hour}").mkdir(parents=True)
        (log / f"interval=20261123T{hour}" / "old.parquet").write_bytes(b"old")
    changelog.prepare_rebuild(str(rebuilt))
    (rebuilt / "interval=20261123T12").mkdir()
    (rebuilt / "interval=20261123T12" / "new.parquet").write_bytes(b"new")
    (rebuilt / changelog.REBUILD_PENDING).rename(rebuilt / changelog.REBUILD_SWAPPING)
    # 11 had no changes: its empty staged partition was swapped in, the old one set aside and not deleted yet
    (log / "_replaced").mkdir()
    (log / "interval=20261123T11").rename(log / "_replaced" / "20261123T11")
    (log / "interval=20261123T11").mkdir()
    interval = (datetime(2026, 11, 23, 11, tzinfo=UTC), datetime(2026, 11, 23, 13, tzinfo=UTC))
    assert changelog.replace_partitions(str(log), str(rebuilt), *interval, "hour") == ["20261123T11",
                                                                                      "20261123T12"]
    assert list((log / "interval=20261123T11").iterdir()) == []
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["new.parquet"]
    assert not (log / "_rebuild").exists() and not (log / "_replaced").exists()
    # once more (the swap is complete): nothing changes
    assert changelog.replace_partitions(str(log), str(rebuilt), *interval, "hour") == ["20261123T11",
                                                                                      "20261123T12"]
    assert [p.name for p in (log / "interval=20261123T12").iterdir()] == ["new.parquet"]
