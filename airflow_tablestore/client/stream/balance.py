"""Lease bookkeeping and balancing decisions: pure functions over a snapshot of the status table.

Expiry is judged locally like the KCL: a lease whose ``LeaseCounter`` has not moved for ``lease_duration_s``
(by this worker's monotonic clock) is expired. Balancing aims at ``ceil(active leases / live workers)`` per
worker: first free or expired leases are taken; then, if still short, one lease of the most loaded worker is
requested through ``LeaseStealer`` — only when that worker is above the target, or at the target while we are
short by more than one (so that an uneven split like 2/1/1 does not oscillate).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from airflow_tablestore.client.stream.lease import Lease


class LeaseObserver:
    """Remembers when each lease's counter last changed."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, float]] = {}

    def observe(self, leases: Iterable[Lease], now: float) -> None:
        current: dict[str, tuple[int, float]] = {}
        for lease in leases:
            prev = self._seen.get(lease.shard_id)
            current[lease.shard_id] = (
                prev if prev is not None and prev[0] == lease.counter else (lease.counter, now)
            )
        self._seen = current

    def expired(self, lease: Lease, now: float, duration: float) -> bool:
        if not lease.owner:
            return True
        seen = self._seen.get(lease.shard_id)
        return seen is not None and seen[0] == lease.counter and now - seen[1] >= duration


def plan(leases: list[Lease], me: str, observer: LeaseObserver, now: float,
         duration: float) -> tuple[list[Lease], Lease | None]:
    """``(leases to take now, lease to request via LeaseStealer or None)``."""
    active = [lease for lease in leases if not lease.finished]
    if not active:
        return [], None
    live = {lease.owner for lease in active if lease.owner and not observer.expired(lease, now, duration)}
    live.add(me)
    target = math.ceil(len(active) / len(live))
    # leases we asked for count as ours while their owner is alive to hand them over
    mine = sum(1 for lease in active if lease.owner == me or (
        lease.stealer == me and lease.owner and not observer.expired(lease, now, duration)))
    available = [lease for lease in active
                 if lease.owner != me and observer.expired(lease, now, duration)]
    # free leases first, then expired ones; shards with no parents before children (they can start now)
    available.sort(key=lambda lease: (bool(lease.owner), len(lease.parent_shard_ids), lease.shard_id))
    take = available[:max(0, target - mine)]
    if take or mine >= target:
        return take, None
    counts = Counter(lease.owner for lease in active if lease.owner in live and lease.owner != me)
    if not counts:
        return [], None
    victim, load = max(counts.items(), key=lambda item: (item[1], item[0]))
    if load > target or (load == target and target - mine > 1):
        candidates = sorted((lease for lease in active if lease.owner == victim and not lease.stealer),
                            key=lambda lease: lease.shard_id)
        if candidates:
            return [], candidates[-1]
    return [], None
