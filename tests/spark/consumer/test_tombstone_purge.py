"""The tombstone purge of fenced replicas (``--purge-tombstones-after``): what it deletes, what it keeps, its
horizon, against the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    ActionType,
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    SequenceInfo,
    TableSchema,
)
from airflow_tablestore.client.replica import FENCE_COLUMN, is_tombstone
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.spark.consumer.job import purge_sink_tombstones
from airflow_tablestore.spark.consumer.options import OptionsError, parse_args
from airflow_tablestore.spark.sinks.purge import minimum_horizon_s, purge_tombstones
from airflow_tablestore.spark.sinks.tablestore import TablestoreSink

HORIZON = 3600.0


@pytest.fixture(scope="module")
def client(settings: ConnectionSettings) -> Iterator[TableClient]:
    with settings.table_client() as table_client:
        yield table_client


def _key(i: int) -> tuple[tuple[str, Any], ...]:
    return (("id", i),)


def _replica(client: TableClient, settings: ConnectionSettings, name: str, deleted: range, live: range) -> None:
    """A replica as the consumer leaves it: ``deleted`` keys are tombstones, ``live`` keys hold data."""
    client.create_table(TableSchema(name, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
    writer = TablestoreSink(settings, name).open("channel", "token", 1)
    records = [Record(ActionType.PUT_ROW, _key(i), (Column("v", f"row {i}"),), SequenceInfo(1, 1000 + i, 0))
               for i in (*deleted, *live)]
    records += [Record(ActionType.DELETE_ROW, _key(i), (), SequenceInfo(1, 5000 + i, 0)) for i in deleted]
    writer.write(records)
    writer.close("end")


def _rows(client: TableClient, table: str) -> dict[int, tuple[Column, ...]]:
    return {row.primary_key[0][1]: row.columns  # type: ignore[misc]
            for row in client.iter_range(table, [("id", INF_MIN)], [("id", INF_MAX)])}


def _fence_ms(client: TableClient, table: str) -> int:
    return max(c.timestamp or 0 for cols in _rows(client, table).values() for c in cols if c.name == FENCE_COLUMN)


def test_old_tombstones_are_deleted_young_ones_and_live_rows_kept(client: TableClient,
                                                                 settings: ConnectionSettings) -> None:
    _replica(client, settings, "purge_basic", deleted=range(0, 30), live=range(30, 40))
    written = _fence_ms(client, "purge_basic")
    young = purge_tombstones(client, "purge_basic", FENCE_COLUMN, HORIZON, now_ms=written + 1000)
    assert (young.tombstones, young.purged, young.young) == (30, 0, 30)
    assert len(_rows(client, "purge_basic")) == 40

    old = purge_tombstones(client, "purge_basic", FENCE_COLUMN, HORIZON, now_ms=written + int(HORIZON * 1000) + 1,
                           page_rows=7)
    assert (old.rows, old.tombstones, old.purged, old.changed) == (40, 30, 30, 0)
    rows = _rows(client, "purge_basic")
    assert sorted(rows) == list(range(30, 40))
    assert not any(is_tombstone(cols) for cols in rows.values())


class _RacingClient:
    """A client whose scan ends with a newer change of row 1 landing (the source re-created it)."""

    def __init__(self, client: TableClient, settings: ConnectionSettings, table: str) -> None:
        self._client, self._settings, self._table = client, settings, table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def iter_range(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        yield from self._client.iter_range(*args, **kwargs)
        writer = TablestoreSink(self._settings, self._table).open("channel", "token", 2)
        writer.write([Record(ActionType.PUT_ROW, _key(1), (Column("v", "again"),), SequenceInfo(1, 9000, 0))])
        writer.close("end")


def test_a_row_that_changed_after_the_scan_is_not_deleted(client: TableClient, settings: ConnectionSettings) -> None:
    _replica(client, settings, "purge_race", deleted=range(0, 3), live=range(0))
    now = _fence_ms(client, "purge_race") + int(HORIZON * 1000) + 1
    result = purge_tombstones(_RacingClient(client, settings, "purge_race"), "purge_race", FENCE_COLUMN, HORIZON,
                              now_ms=now)
    assert (result.tombstones, result.purged, result.changed) == (3, 2, 1)
    rows = _rows(client, "purge_race")
    assert list(rows) == [1] and [c.value for c in rows[1] if c.name == "v"] == ["again"]


def test_a_stale_change_after_the_horizon_is_what_the_horizon_excludes(client: TableClient,
                                                                      settings: ConnectionSettings) -> None:
    """Why the horizon exists: within it the tombstone refuses an older change; once it is purged, the same
    stale change brings the deleted row back. The horizon must outlast every stale write, so that this cannot
    happen."""
    _replica(client, settings, "purge_why", deleted=range(0, 1), live=range(0))
    stale = Record(ActionType.PUT_ROW, _key(0), (Column("v", "stale"),), SequenceInfo(1, 1000, 0))

    def send_stale() -> int:
        writer = TablestoreSink(settings, "purge_why").open("channel", "token", 2)
        writer.write([stale])
        writer.close("end")
        return writer.refused

    assert send_stale() == 1 and is_tombstone(_rows(client, "purge_why")[0])  # within the horizon: refused
    now = _fence_ms(client, "purge_why") + int(HORIZON * 1000) + 1
    assert purge_tombstones(client, "purge_why", FENCE_COLUMN, HORIZON, now_ms=now).purged == 1
    assert _rows(client, "purge_why") == {}
    assert send_stale() == 0  # after the purge nothing refuses it: the deleted row is back
    assert [c.value for c in _rows(client, "purge_why")[0] if c.name == "v"] == ["stale"]


def test_the_consumer_purges_after_its_run(client: TableClient, settings: ConnectionSettings,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _replica(client, settings, "purge_consumer", deleted=range(0, 2), live=range(2, 3))
    options = parse_args(["--table", "src", "--tunnel", "t", "--phase", "full", "--sink", "tablestore",
                          "--sink-table", "purge_consumer", "--purge-tombstones-after", "1000000"])
    purge_sink_tombstones(options, TablestoreSink(settings, "purge_consumer"))
    assert '"tombstones": 2' in capsys.readouterr().out  # younger than the horizon: kept
    assert len(_rows(client, "purge_consumer")) == 3


def _horizon(**changed: float) -> float:
    """The minimum horizon of the consumer's default settings, with ``changed`` ones."""
    given = {"request_timeout": 60.0, "client_timeout": 60.0, "heartbeat_interval": 5.0,
             "records_per_channel": 50_000.0, "retry_budget_s": 60.0, **changed}
    return minimum_horizon_s(request_timeout=given["request_timeout"], client_timeout=given["client_timeout"],
                             heartbeat_interval=given["heartbeat_interval"],
                             records_per_channel=int(given["records_per_channel"]),
                             retry_budget_s=given["retry_budget_s"])


def test_the_horizon_is_bounded_by_the_timeouts() -> None:
    # the consumer's defaults: request 60 s, client timeout 60 s, heartbeat 5 s, 50,000 records per channel,
    # the client's retry budget 60 s, 3 s between row tries, 60 s clock skew:
    #   call = 60 + 60 = 120 s; batches = ceil(50,000 / 200) + 1 = 251
    #   60 + 5 + 120 + 251 * 5 * (120 + 3) + 60 = 185 + 154,365 + 60 = 154,610 s (about 43 hours)
    assert _horizon() == 154_610
    assert minimum_horizon_s(request_timeout=60, client_timeout=60, heartbeat_interval=5,
                             records_per_channel=50_000) == 154_610  # the client's own retry budget is 60 s
    # small settings: call = 10 + 3 = 13 s; batches = ceil(120 / 200) + 1 = 2
    #   5 + 1 + 13 + 2 * 5 * (13 + 3) + 60 = 239 s
    assert minimum_horizon_s(request_timeout=3, client_timeout=5, heartbeat_interval=1, records_per_channel=120,
                             retry_budget_s=10) == 239
    # every timeout (and a longer round) lengthens it; records within the same batch count do not
    for name, longer in [("request_timeout", 61.0), ("client_timeout", 61.0), ("heartbeat_interval", 6.0),
                         ("retry_budget_s", 61.0), ("records_per_channel", 50_001.0)]:
        assert _horizon(**{name: longer}) > 154_610, name
    assert _horizon(records_per_channel=49_801.0) == 154_610  # still 250 batches of 200
    # the consumer refuses a purge horizon below the minimum of its settings, and prints it
    defaults = ["--table", "s", "--tunnel", "t", "--phase", "full", "--sink", "tablestore", "--sink-table", "r"]
    assert parse_args([*defaults, "--purge-tombstones-after", "154610"]).purge_tombstones_after == 154_610
    with pytest.raises(OptionsError, match="is below 154610s, the longest a stale write"):
        parse_args([*defaults, "--purge-tombstones-after", "154609"])
    base = ["--table", "s", "--tunnel", "t", "--phase", "full"]
    with pytest.raises(OptionsError, match="needs --sink tablestore with a fence"):
        parse_args([*base, "--sink", "parquet", "--sink-path", "/tmp/x", "--purge-tombstones-after", "1e9"])
    with pytest.raises(OptionsError, match="needs --sink tablestore with a fence"):
        parse_args([*base, "--sink", "tablestore", "--sink-table", "r", "--fence-column", "",
                    "--purge-tombstones-after", "1e9"])


def test_the_operator_passes_the_purge_to_the_consumer() -> None:
    from airflow_tablestore.operators.spark_submit import consumer_arguments

    args = consumer_arguments(table="s", tunnel="t", phase="incremental", sink="tablestore", sink_table="r",
                              purge_tombstones_after=259200, cutoff="2026-11-21T12:00:00Z")
    assert args[-2:] == ["--cutoff", "2026-11-21T12:00:00Z"]
    assert parse_args(args).purge_tombstones_after == 259200
