"""``StreamBacklog`` against the emulator: counts past a consume point, the read budget, reported changes, the
floor of a tunnel that was never consumed, and a table without a stream."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_tablestore.client import TableClient
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, StreamSpec, TableSchema, TunnelType
from airflow_tablestore.client.stream.backlog import StreamBacklog, unconsumed_since_ns
from airflow_tablestore.client.stream.client import StreamClient
from airflow_tablestore.client.tunnel.client import TunnelClient


def _schema(name: str, stream: bool = True) -> TableSchema:
    return TableSchema(name, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                       stream=StreamSpec(True, 24) if stream else None)


def _put(client: TableClient, table: str, keys: range) -> None:
    for i in keys:
        client.put_row(table, (("id", i),), [("v", i)])


def test_counts_past_the_consume_point_within_a_read_budget(table_client: TableClient, unique_name: str) -> None:
    table_client.create_table(_schema(unique_name))
    stream = StreamClient(transport=table_client.transport)
    _put(table_client, unique_name, range(5))
    between = time.time_ns()
    _put(table_client, unique_name, range(5, 30))

    backlog = StreamBacklog(stream, unique_name, read_budget=10)
    first = backlog.poll(between)
    assert not first.caught_up and first.records <= 10  # the budget ran out: the rest is read by later polls
    while not (found := backlog.poll(between)).caught_up:
        pass
    assert found.records == 25 and found.first_us is not None and found.first_us * 1000 > between
    assert found.last_us is not None and found.first_us <= found.last_us

    later = found.last_us * 1000 - 1  # the consumer moved on: all but the newest change are consumed
    assert backlog.poll(later).records == 1
    backlog.mark_reported()
    assert backlog.poll(later).records == 0  # reported changes are not counted again
    _put(table_client, unique_name, range(30, 33))
    assert backlog.poll(later).records == 3
    assert StreamBacklog(stream, unique_name).poll(between).records == 28  # a new instance: from the floor


def test_a_table_without_a_stream_is_an_error(table_client: TableClient, unique_name: str) -> None:
    table_client.create_table(_schema(unique_name, stream=False))
    with pytest.raises(TablestoreClientError, match="no stream enabled"):
        StreamBacklog(StreamClient(transport=table_client.transport), unique_name).poll(0)


def test_a_tunnel_nobody_consumed_counts_from_its_start(table_client: TableClient, unique_name: str,
                                                         tablestore_emulator: Any) -> None:
    table_client.create_table(_schema(unique_name))
    with TunnelClient(**tablestore_emulator.client_kwargs) as tunnels:
        before = time.time_ns()
        tunnels.create_tunnel(unique_name, "tn", TunnelType.STREAM)
        floor = unconsumed_since_ns(tunnels.describe_tunnel(unique_name, "tn"))
    assert floor >= before - 5_000_000_000  # the tunnel's start (its creation), never 0
