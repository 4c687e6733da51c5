"""The replica verifier against the emulator: every kind of difference, the fence and tombstones, streaming in
small pages, and the command's exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.errors import NotFoundError
from airflow_tablestore.client.model import (
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowWrite,
    TableOptions,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.replica import FENCE_COLUMN, TOMBSTONE_SUFFIX
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.verify.compare import VerifyError, verify_replica

TS = 1_700_000_000_000
_names = iter(range(10**6))


def _table(client: TableClient, keys: tuple[tuple[str, PrimaryKeyType], ...] = (
        ("region", PrimaryKeyType.STRING), ("id", PrimaryKeyType.INTEGER))) -> str:
    name = f"verify_{next(_names)}"
    client.create_table(TableSchema(
        name=name, primary_key=tuple(PrimaryKeyColumn(n, t) for n, t in keys),
        options=TableOptions(max_versions=3, max_time_deviation=2**31 - 1)))
    return name


def _put(client: TableClient, table: str, i: int, *columns: Column) -> None:
    client.write_rows([RowWrite(table, WriteType.PUT, (("region", f"r{i % 3}"), ("id", i)), columns)])


def _row(i: int, fence: str | None = None) -> tuple[Column, ...]:
    cells = (Column("name", f"user-{i}", TS + i), Column("score", i * 1.5, TS + i), Column("ok", i % 2 == 0, TS + i),
             Column("blob", bytes([i % 256]), TS + i))
    return (*cells, Column(FENCE_COLUMN, fence, TS + 10**6)) if fence is not None else cells


@pytest.fixture
def pair(tablestore_client: TableClient) -> Iterator[tuple[TableClient, str, str]]:
    """A source and a fenced replica holding the same five rows."""
    src, dst = _table(tablestore_client), _table(tablestore_client)
    for i in range(5):
        _put(tablestore_client, src, i, *_row(i))
        _put(tablestore_client, dst, i, *_row(i, "0"))
    yield tablestore_client, src, dst
    for table in (src, dst):
        tablestore_client.delete_table(table)


def _verify(pair: tuple[TableClient, str, str], **options: Any) -> Any:
    client, src, dst = pair
    return verify_replica(client, src, client, dst, **options)


def test_equal_tables_with_a_fence_column(pair: tuple[TableClient, str, str]) -> None:
    for all_versions in (False, True):
        report = _verify(pair, all_versions=all_versions)
        assert report.ok, str(report)
        assert (report.rows_compared, report.equal, report.missing, report.extra, report.differing) == (5, 5, 0, 0, 0)
        assert report.versions == ("all" if all_versions else "newest")
        assert "is equal" in report.summary()


def test_the_fence_column_counts_as_data_without_a_fence(pair: tuple[TableClient, str, str]) -> None:
    report = _verify(pair, fence_column="")
    assert not report.ok
    assert report.differing == 5
    assert report.differences[0].columns == (FENCE_COLUMN,)


def test_a_missing_row_and_an_extra_row(pair: tuple[TableClient, str, str]) -> None:
    client, src, dst = pair
    client.delete_row(dst, (("region", "r1"), ("id", 1)))
    _put(client, dst, 99, *_row(99, "0"))
    report = _verify(pair)
    assert (report.rows_compared, report.equal, report.missing, report.extra, report.differing) == (6, 4, 1, 1, 0)
    assert [str(d) for d in report.differences] == [  # in primary-key order
        "extra in the replica: (region='r0', id=99)", "missing in the replica: (region='r1', id=1)"]
    assert "DIFFERENT" in str(report) and "missing in the replica: (region='r1', id=1)" in str(report)


def test_a_differing_cell_names_its_column(pair: tuple[TableClient, str, str]) -> None:
    client, src, dst = pair
    client.write_rows([RowWrite(dst, WriteType.UPDATE, (("region", "r2"), ("id", 2)),
                                (Column("score", 3, TS + 2),))])  # INTEGER 3 where the source has DOUBLE 3.0
    report = _verify(pair)
    assert report.differing == 1 and report.equal == 4
    assert str(report.differences[0]) == "differs: (region='r2', id=2) in column(s) score"


def test_a_differing_older_version_only_with_all_versions(pair: tuple[TableClient, str, str]) -> None:
    client, src, dst = pair
    key = (("region", "r0"), ("id", 3))
    client.write_rows([RowWrite(src, WriteType.UPDATE, key, (Column("name", "old", TS - 5),))])
    client.write_rows([RowWrite(dst, WriteType.UPDATE, key, (Column("name", "OLD", TS - 5),))])
    assert _verify(pair).ok  # the newest versions agree
    report = _verify(pair, all_versions=True)
    assert report.differing == 1
    assert report.differences[0].columns == ("name",)


def test_tombstones_are_deleted_rows(pair: tuple[TableClient, str, str]) -> None:
    client, src, dst = pair
    tombstone = (Column(FENCE_COLUMN, "00000001" + TOMBSTONE_SUFFIX, TS + 2 * 10**6),)
    client.delete_row(src, (("region", "r1"), ("id", 4)))                   # deleted in the source ...
    client.put_row(dst, (("region", "r1"), ("id", 4)), tombstone)          # ... a tombstone in the replica
    report = _verify(pair, all_versions=True)
    assert report.ok, str(report)
    assert (report.rows_compared, report.tombstones) == (4, 1)

    client.put_row(dst, (("region", "r0"), ("id", 0)), tombstone)          # a row the source still has
    report = _verify(pair)
    assert [str(d) for d in report.differences] == ["missing in the replica: (region='r0', id=0)"]


def test_counts_all_lists_the_first(pair: tuple[TableClient, str, str]) -> None:
    client, src, dst = pair
    for i in range(10, 20):
        _put(client, src, i, *_row(i))
    report = _verify(pair, max_differences=3)
    assert report.missing == 10 and len(report.differences) == 3
    assert str(report).endswith("... and 7 more")
    assert report.to_dict()["missing"] == 10 and len(report.to_dict()["differences"]) == 3


def test_many_rows_are_streamed_in_small_pages(tablestore_client: TableClient) -> None:
    src, dst = _table(tablestore_client), _table(tablestore_client)
    n = 600
    for table, fence in ((src, None), (dst, "0")):
        tablestore_client.write_rows([
            RowWrite(table, WriteType.PUT, (("region", f"r{i % 3}"), ("id", i)), _row(i, fence)) for i in range(n)])

    calls: list[tuple[str, int | None]] = []

    class Spy(TableClient):
        def get_range(self, table: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((table, kwargs.get("limit")))
            return super().get_range(table, *args, **kwargs)

    spy = Spy(transport=tablestore_client.transport)  # borrows the fixture's transport (not closed here)
    report = verify_replica(spy, src, spy, dst, page_size=25)
    assert report.ok and report.rows_compared == n
    assert report.source_pages >= n // 25 and report.replica_pages >= n // 25  # at most 25 rows a page
    assert {limit for _, limit in calls} == {25}
    # streamed: the two tables' pages alternate (a verifier that loaded one table first would read it whole)
    order = [table for table, _ in calls]
    assert order[:4] == [src, dst, src, dst]
    switches = sum(1 for a, b in zip(order, order[1:], strict=False) if a != b)
    assert switches >= n // 25


def test_tables_that_cannot_be_replicas(tablestore_client: TableClient) -> None:
    src = _table(tablestore_client)
    other = _table(tablestore_client, (("region", PrimaryKeyType.STRING), ("id", PrimaryKeyType.STRING)))
    with pytest.raises(VerifyError) as err:
        verify_replica(tablestore_client, src, tablestore_client, other)
    assert str(err.value).startswith("OTSVerifyInvalid: the primary keys differ")
    assert "source (region STRING, id INTEGER), replica (region STRING, id STRING)" in str(err.value)
    with pytest.raises(NotFoundError, match="'no_such_replica'"):
        verify_replica(tablestore_client, src, tablestore_client, "no_such_replica")


# ---- the command ----------------------------------------------------------------------------------------


def _command(emulator: Any, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    kw = emulator.client_kwargs
    base = {k: v for k, v in os.environ.items() if not k.startswith("TABLESTORE_")}
    base.update({"TABLESTORE_ENDPOINT": kw["endpoint"], "TABLESTORE_INSTANCE": kw["instance_name"],
                 "TABLESTORE_ACCESS_KEY_ID": kw["access_key_id"],
                 "TABLESTORE_ACCESS_KEY_SECRET": kw["access_key_secret"]})
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "airflow_tablestore.client.verify", *args], env=base,
                          capture_output=True, text=True, timeout=120)


def test_command_exit_codes(pair: tuple[TableClient, str, str], tablestore_emulator: Any) -> None:
    client, src, dst = pair
    secret = tablestore_emulator.client_kwargs["access_key_secret"]
    equal = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst, "--all-versions")
    assert equal.returncode == 0, equal.stderr
    assert "is equal (all versions): 5 rows compared, 5 equal" in equal.stdout

    client.delete_row(dst, (("region", "r1"), ("id", 1)))
    different = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst)
    assert different.returncode == 1, different.stderr
    assert "DIFFERENT" in different.stdout and "missing in the replica: (region='r1', id=1)" in different.stdout

    missing = _command(tablestore_emulator, "--source-table", src, "--replica-table", "nope")
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "OTSObjectNotExist" in missing.stderr and "'nope'" in missing.stderr

    usage = _command(tablestore_emulator, "--source-table", src)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1
    assert "the following arguments are required: --replica-table" in usage.stderr
    bad = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst, "--page-size", "0")
    assert bad.returncode == 2 and "--page-size" in bad.stderr and bad.stderr.count("\n") == 1

    no_secret = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst,
                         env={"TABLESTORE_ACCESS_KEY_SECRET": ""})
    assert no_secret.returncode == 2 and no_secret.stderr.count("\n") == 1
    assert "missing Tablestore settings access_key_secret" in no_secret.stderr

    unreachable = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst,
                           env={"TABLESTORE_ENDPOINT": "http://127.0.0.1:9", "TABLESTORE_ACCESS_KEY_SECRET": secret})
    assert unreachable.returncode == 2 and unreachable.stderr.count("\n") == 1
    for result in (equal, different, missing, usage, bad, no_secret, unreachable):
        assert secret not in result.stdout + result.stderr


def test_command_reads_the_replica_instance_like_the_consumer(pair: tuple[TableClient, str, str],
                                                              tablestore_emulator: Any, tmp_path: Any) -> None:
    """A replica on another instance: ``TABLESTORE_SINK_*`` or the credentials file's ``sink`` object, as the
    Spark consumer reads its sink (here the same emulator, then an address where nothing listens)."""
    import json

    client, src, dst = pair
    kw = tablestore_emulator.client_kwargs
    sink = {"TABLESTORE_SINK_ENDPOINT": kw["endpoint"], "TABLESTORE_SINK_INSTANCE": kw["instance_name"],
            "TABLESTORE_SINK_ACCESS_KEY_ID": kw["access_key_id"],
            "TABLESTORE_SINK_ACCESS_KEY_SECRET": kw["access_key_secret"]}
    assert _command(tablestore_emulator, "--source-table", src, "--replica-table", dst, env=sink).returncode == 0
    elsewhere = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst,
                         env=sink | {"TABLESTORE_SINK_ENDPOINT": "http://127.0.0.1:9"})
    assert elsewhere.returncode == 2 and "127.0.0.1:9" in elsewhere.stderr  # the replica is read there

    block = {"endpoint": kw["endpoint"], "instance_name": kw["instance_name"], "access_key_id": kw["access_key_id"],
             "access_key_secret": kw["access_key_secret"]}
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps({"source": block, "sink": block}))
    from_file = _command(tablestore_emulator, "--source-table", src, "--replica-table", dst, "--credentials-file",
                         str(path), env={"TABLESTORE_ACCESS_KEY_SECRET": "", "TABLESTORE_ENDPOINT": ""})
    assert from_file.returncode == 0, from_file.stderr
    assert kw["access_key_secret"] not in from_file.stdout + from_file.stderr + elsewhere.stderr
