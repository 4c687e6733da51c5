"""Spans against a real emulator: any chain of spans yields a channel's records once each and in order, a span
read again yields the same records (also after more changes arrived at the head), and the consumer's
whole-answer reads end on tokens."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableSchema,
    TunnelType,
)
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.reads import FINISHED
from airflow_tablestore.client.tunnel.span import Position, Span, SpanEnd, SpanRead, drain
from airflow_tablestore.emulator.testing import EmulatorProcess

_ids = itertools.count()


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "1000", "--max-read-records", "7",
                                     "--stream-partitions", "1", "--log-level", "WARNING"]) as e:
        yield e


def _channel(tunnels: TunnelClient, tables: Any, kind: TunnelType, rows: int) -> tuple[str, str, str, str, str]:
    """A table with ``rows`` rows and a tunnel of ``kind``: (tunnel id, client id, channel id, start token, table)."""
    name = f"sp{next(_ids)}"
    tables.create_table(TableSchema(name=name, primary_key=(PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                    stream=StreamSpec(enabled=True, expiration_hours=24)))
    if kind is TunnelType.BASE_DATA:  # base data: the rows as they are when the tunnel is created
        for i in range(rows):
            tables.put_row(name, (("id", i),), [Column("v", i)])
    tunnel_id = tunnels.create_tunnel(name, "t", kind)
    if kind is TunnelType.STREAM:
        for i in range(rows):
            tables.put_row(name, (("id", i),), [Column("v", i)])
    client_id = tunnels.connect(tunnel_id, timeout_s=60)
    channel = tunnels.heartbeat(tunnel_id, client_id, [])[0]
    token, _ = tunnels.get_checkpoint(tunnel_id, client_id, channel.channel_id)
    return tunnel_id, client_id, channel.channel_id, token, name


def _read(tunnels: TunnelClient, ids: tuple[str, str, str], span: Span, **kwargs: Any) -> tuple[list[Any], SpanEnd]:
    read = SpanRead(tunnels, *ids, span, **kwargs)
    records = [r for answer in read for r in answer]
    assert read.end is not None
    return records, read.end


@pytest.mark.parametrize("kind", [TunnelType.BASE_DATA, TunnelType.STREAM])
@pytest.mark.parametrize("limits", [(1,), (3,), (7,), (10,), (1, 6, 13, 2), (100,)])
def test_a_chain_of_spans_reads_every_record_once_in_order(tablestore_tunnel_client: TunnelClient,
                                                           tablestore_client: Any, kind: TunnelType,
                                                           limits: tuple[int, ...]) -> None:
    tunnel_id, client_id, channel_id, token, _ = _channel(tablestore_tunnel_client, tablestore_client, kind, 40)
    ids = (tunnel_id, client_id, channel_id)
    stream = kind is TunnelType.STREAM
    until = time.time_ns() // 1000 if stream else None
    position, seen = Position(token), []
    for limit in itertools.cycle(limits):
        span = Span(position, limit, until, stream)
        records, end = _read(tablestore_tunnel_client, ids, span)
        assert len(records) <= limit and end.records == len(records)
        again, end_again = _read(tablestore_tunnel_client, ids, span)  # repeatable (tokens may differ: equal
        assert again == records and end_again.records == end.records  # positions can have several tokens)
        seen += records
        position = end.position
        if end.finished or end.caught_up or end.reached_until or not records:
            break
    assert [r.primary_key[0][1] for r in seen] == list(range(40))


def test_a_stream_span_is_repeatable_after_more_changes_arrive(tablestore_tunnel_client: TunnelClient,
                                                               tablestore_client: Any) -> None:
    tunnel_id, client_id, channel_id, token, table = _channel(tablestore_tunnel_client, tablestore_client,
                                                              TunnelType.STREAM, 10)
    ids = (tunnel_id, client_id, channel_id)
    time.sleep(0.01)
    until = time.time_ns() // 1000
    span = Span(Position(token), 100, until, stream=True)
    first, end = _read(tablestore_tunnel_client, ids, span)
    assert len(first) == 10 and end.caught_up
    for i in range(10, 30):  # changes after `until`
        tablestore_client.put_row(table, (("id", i),), [Column("v", i)])
    again, end_again = _read(tablestore_tunnel_client, ids, span)
    assert again == first and end_again.records == 10
    # the next span from either end position reads exactly the later changes
    for position in (end.position, end_again.position):
        later, _ = _read(tablestore_tunnel_client, ids, Span(position, 100, None, stream=True))
        assert [r.primary_key[0][1] for r in later] == list(range(10, 30))


def test_whole_answers_end_on_tokens(tablestore_tunnel_client: TunnelClient, tablestore_client: Any) -> None:
    tunnel_id, client_id, channel_id, token, _ = _channel(tablestore_tunnel_client, tablestore_client,
                                                          TunnelType.BASE_DATA, 20)
    ids = (tunnel_id, client_id, channel_id)
    records, end = _read(tablestore_tunnel_client, ids, Span(Position(token), 3), whole_answers=True)
    assert len(records) == 7 and end.position.skip == 0  # one whole answer of 7 (--max-read-records)
    rest = drain(SpanRead(tablestore_tunnel_client, *ids, Span(end.position, 1000), whole_answers=True))
    assert rest.records == 13 and rest.position == Position(FINISHED)


def test_positions_and_spans_round_trip_through_json() -> None:
    span = Span(Position("tok", 3), 50, 123, stream=True)
    assert Span.from_dict(span.as_dict()) == span
    assert Span.from_dict(Span(Position("t"), 5).as_dict()).until_us is None
    end = SpanEnd(Position("t2", 1), 9, caught_up=True)
    assert SpanEnd.from_dict(end.as_dict()) == end
    assert span.key("c1") != span.key("c2") and span.key("c1") == Span.from_dict(span.as_dict()).key("c1")
