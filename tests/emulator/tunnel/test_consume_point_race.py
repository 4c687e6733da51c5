"""A channel's consume point never runs ahead of committed data: once it is T, every change stamped before T has
been delivered on that channel. The DAG and the sensor rely on "consume point >= cutoff" meaning "everything
before the cutoff is replicated".

Writers and a reader hammer one single-partition table at once; after every read the test checks that no record
delivered later is stamped below a consume point already reported.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.model import (
    PrimaryKeyColumn,
    PrimaryKeyType,
    StreamSpec,
    TableSchema,
    TunnelType,
)
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.reads import FINISHED
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

tunnel_pb2: Any = _tunnel_pb2

READS = 3000
WRITERS = 3


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--stream-partitions", "1", "--max-read-records", "5",
                                     "--log-level", "WARNING"]) as emulator:
        yield emulator


def consume_point_ns(token: str) -> int:
    """The consume point a stream token carries (``TokenContentV2.timestamp``, ns)."""
    outer = tunnel_pb2.Token.FromString(base64.b64decode(token))
    return int(tunnel_pb2.TokenContentV2.FromString(outer.content).timestamp)


def test_consume_point_never_passes_an_undelivered_change(tablestore_emulator: EmulatorProcess,
                                                          tablestore_client: TableClient,
                                                          tablestore_tunnel_client: TunnelClient) -> None:
    tablestore_client.create_table(TableSchema("race", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                               stream=StreamSpec(enabled=True, expiration_hours=24)))
    tunnel_id = tablestore_tunnel_client.create_tunnel("race", "race", TunnelType.STREAM)
    client_id = tablestore_tunnel_client.connect(tunnel_id, timeout_s=300)
    (channel,) = tablestore_tunnel_client.heartbeat(tunnel_id, client_id, [])
    token, _ = tablestore_tunnel_client.get_checkpoint(tunnel_id, client_id, channel.channel_id)

    stop = threading.Event()
    keys = itertools.count()

    def write() -> None:
        with TableClient(**tablestore_emulator.client_kwargs) as writer:
            while not stop.is_set():
                writer.put_row("race", [("id", next(keys))], {"v": "x"})

    threads = [threading.Thread(target=write, daemon=True) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    reported = 0  # the highest consume point reported so far (ns)
    delivered = 0
    violations = []
    try:
        for _ in range(READS):
            result = tablestore_tunnel_client.read_records(tunnel_id, client_id, channel.channel_id, token)
            for record in result.records:
                assert record.sequence is not None
                stamp_ns = record.sequence.timestamp * 1000
                if stamp_ns < reported:
                    violations.append((stamp_ns, reported))
            delivered += len(result.records)
            assert result.next_token != FINISHED
            token = result.next_token
            reported = max(reported, consume_point_ns(token))
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert delivered > READS  # the reader really raced the writers (most reads returned changes)
    assert violations == [], f"{len(violations)} changes arrived after the consume point passed them"
