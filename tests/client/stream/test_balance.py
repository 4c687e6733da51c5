"""Lease balancing decisions (pure functions): take free/expired leases, steal only when uneven, no
oscillation."""

from __future__ import annotations

from airflow_tablestore.client.stream.balance import LeaseObserver, plan
from airflow_tablestore.client.stream.lease import SHARD_END, Lease

DURATION = 10.0


def _leases(*owners: str, stealer: str = "") -> list[Lease]:
    return [Lease("s", f"shard-{i}", counter=1, owner=o, stealer=stealer) for i, o in enumerate(owners)]


def _observed(leases: list[Lease], at: float = 0.0) -> LeaseObserver:
    observer = LeaseObserver()
    observer.observe(leases, at)
    return observer


def test_a_lone_worker_takes_every_free_lease_parents_first() -> None:
    leases = _leases("", "", "")
    leases.append(Lease("s", "child", owner="", parent_shard_ids=("shard-0",)))
    take, steal = plan(leases, "me", _observed(leases), 1.0, DURATION)
    assert [lease.shard_id for lease in take] == ["shard-0", "shard-1", "shard-2", "child"] and steal is None


def test_finished_leases_are_ignored() -> None:
    leases = [Lease("s", "done", checkpoint=SHARD_END, owner="")]
    assert plan(leases, "me", _observed(leases), 1.0, DURATION) == ([], None)


def test_a_new_worker_asks_the_busiest_one_for_a_lease() -> None:
    leases = _leases("a", "a", "a", "a", "b", "b")
    take, steal = plan(leases, "me", _observed(leases), 1.0, DURATION)
    assert take == [] and steal is not None and steal.owner == "a"


def test_an_uneven_but_minimal_spread_is_stable() -> None:
    leases = _leases("a", "a", "b", "me")  # 2/1/1: target 2, nobody above it
    assert plan(leases, "me", _observed(leases), 1.0, DURATION) == ([], None)
    assert plan(leases, "b", _observed(leases), 1.0, DURATION) == ([], None)


def test_expired_leases_are_taken_and_a_dead_owner_does_not_count() -> None:
    leases = _leases("dead", "dead", "dead", stealer="me")
    observer = _observed(leases, at=0.0)
    assert plan(leases, "me", observer, DURATION / 2, DURATION)[0] == []  # still alive: wait
    take, steal = plan(leases, "me", observer, DURATION + 1, DURATION)
    assert len(take) == 3 and steal is None  # our pending steal requests on a dead owner don't count as ours


def test_a_moving_counter_keeps_a_lease_alive() -> None:
    leases = _leases("a")
    observer = _observed(leases, at=0.0)
    renewed = [Lease("s", "shard-0", counter=2, owner="a")]
    observer.observe(renewed, DURATION - 1)
    assert not observer.expired(renewed[0], DURATION + 1, DURATION)
    assert observer.expired(renewed[0], 2 * DURATION, DURATION)
