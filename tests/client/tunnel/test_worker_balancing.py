"""Three workers share a stream tunnel; one crashes; its channels move and the replica stays exact."""

from __future__ import annotations

from typing import Any

from airflow_tablestore.client.model import Column, TunnelType
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.worker import TunnelWorker

from .helpers import RecordingProcessor, fast_config, full_scan, table_schema
from .test_worker_replication import BASE_MS, wait_for

EMULATOR_ARGS = ["--max-read-records", "20", "--stream-partitions", "6", "--log-level", "WARNING"]


def _write(tables: Any, table: str, start: int, stop: int) -> None:
    for i in range(start, stop):
        key = (("pk", f"k{i % 13}"), ("n", i % 17))
        tables.put_row(table, key, [Column("v", i, BASE_MS + i), Column("w", f"x{i}", BASE_MS + i)])
        if i % 4 == 0:
            tables.update_row(table, key, [Column("v", i * 10, BASE_MS + i + 1)])


def _in_order(sequences: list[tuple[int, int, int]]) -> bool:
    """First deliveries are increasing; a step back is only allowed to something already seen (a replay)."""
    seen: set[tuple[int, int, int]] = set()
    newest = None
    for seq in sequences:
        if newest is not None and seq < newest and seq not in seen:
            return False
        seen.add(seq)
        newest = seq if newest is None or seq > newest else newest
    return True


def test_channels_spread_and_move_after_a_crash(
    tablestore_client: Any, tablestore_tunnel_client: TunnelClient, unique_table: str
) -> None:
    source, replica = f"{unique_table}src", f"{unique_table}dst"
    tablestore_client.create_table(table_schema(source))
    tablestore_client.create_table(table_schema(replica, stream=False))
    tunnel_id = tablestore_tunnel_client.create_tunnel(source, "shared", TunnelType.STREAM)
    processor = RecordingProcessor(tablestore_client, replica)
    workers = [TunnelWorker(tablestore_tunnel_client, tunnel_id, processor, fast_config(client_tag=f"w{i}"))
               for i in range(3)]
    try:
        for w in workers:
            w.start()
        wait_for(lambda: sorted(len(w.owned_channels()) for w in workers) == [2, 2, 2],
                 "6 channels spread 2/2/2 over 3 workers", workers=workers)
        _write(tablestore_client, source, 0, 150)
        wait_for(
            lambda: len(processor.records) >= 150 + 150 // 4,
            "the first writes to be consumed",
            workers=workers,
        )

        crashed = workers[0]
        moved = crashed.owned_channels()
        crashed.shutdown(graceful=False)  # no checkpoint flush, no Shutdown RPC: like a killed process
        _write(tablestore_client, source, 150, 300)
        survivors = workers[1:]
        wait_for(lambda: sorted(len(w.owned_channels()) for w in survivors) == [3, 3],
                 "the crashed worker's channels to move after its heartbeat timeout")
        owners = {cid for w in survivors for cid in w.owned_channels()}
        assert set(moved) <= owners
        wait_for(lambda: full_scan(tablestore_client, replica) == full_scan(tablestore_client, source),
                 "the replica to converge", workers=workers)
    finally:
        for w in workers:
            w.shutdown()
    assert all(w.error is None for w in workers)
    sequences = processor.per_key_sequences()
    assert sequences and all(_in_order(seqs) for seqs in sequences.values())
