"""Leases are created, taken and renewed 200 to a BatchWriteRow, each row under its own condition: the requests
grow with shards / 200, and one lost lease does not touch the others."""

from __future__ import annotations

from collections.abc import Callable

from airflow_tablestore.client.stream.lease import Lease, LeaseManager
from airflow_tablestore.client.stream.shard import LeaseHolder
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.emulator.testing import EmulatorProcess

SHARDS = 250  # two batches


def _leases(manager: LeaseManager) -> dict[str, Lease]:
    return {lease.shard_id: lease for lease in manager.list("stream")}


def test_create_take_and_renew_in_batches(
    tablestore_emulator: EmulatorProcess, tablestore_client: TableClient, names: Callable[[str], str]
) -> None:
    manager = LeaseManager(tablestore_client, names("status"))
    manager.ensure_table()
    new = [Lease("stream", f"shard-{i:03}") for i in range(SHARDS)]
    control = tablestore_emulator.control
    control.request_counts(reset=True)
    assert manager.create_all(new) == [True] * SHARDS
    assert manager.create_all(new[:3]) == [False] * 3  # they exist: created once only
    taken = manager.take_all(list(_leases(manager).values()), "w1")
    assert all(isinstance(lease, Lease) and lease.owner == "w1" and lease.counter == 1 for lease in taken)
    counts = control.request_counts()
    assert counts.get("/BatchWriteRow") == 2 + 1 + 2 and not counts.get("/UpdateRow") and not counts.get("/PutRow")
    # another worker takes one lease: only that one is lost at the next renewal
    stolen = _leases(manager)["shard-007"]
    assert isinstance(manager.take_all([stolen], "w2")[0], Lease)
    holders = [LeaseHolder(manager, lease) for lease in taken if isinstance(lease, Lease)]
    lost = LeaseHolder.renew_all(manager, holders)
    assert [holder.lease.shard_id for holder in lost] == ["shard-007"] and lost[0].lost
    stored = _leases(manager)
    assert stored["shard-007"].owner == "w2" and stored["shard-007"].counter == 2
    assert all(stored[h.lease.shard_id].counter == 2 == h.lease.counter for h in holders if not h.lost)
    # a taken lease is taken once: the second try sees another counter
    assert manager.take_all([stolen], "w3") == [None]
    # a lost holder is not renewed again; released ones neither
    holders[0].released = True
    control.request_counts(reset=True)
    assert LeaseHolder.renew_all(manager, holders) == []
    assert control.request_counts().get("/BatchWriteRow") == 2
    after = _leases(manager)
    assert after["shard-000"].counter == 2 and after["shard-001"].counter == 3 and after["shard-007"].counter == 2
