"""Shard leases in the status table, changed only through conditional updates (optimistic lock).

Row: primary key ``(StreamId, StatusType="ShardLease", StatusValue=<shard id>)``; attributes ``Checkpoint``
(``TRIM_HORIZON``, ``SHARD_END``, a shard iterator, or ``TS:<µs>:<row_index>``), ``LeaseCounter`` (bumped by
every change the owner makes — renewals included), ``LeaseOwner`` (``""`` = free), ``LeaseStealer`` (worker
that asked for the lease during balancing, ``""`` = none) and ``ParentShardIds`` (JSON list).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_tablestore.client.errors import ConditionFailedError, NotFoundError, TablestoreClientError
from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    Comparator,
    CompositeColumnCondition,
    Condition,
    LogicalOperator,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RowExistence,
    RowWrite,
    SingleColumnCondition,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.table.arguments import normalize_columns, normalize_primary_key
from airflow_tablestore.client.table.batch_write import MAX_BATCH_WRITE_ROWS
from airflow_tablestore.client.table.client import TableClient

log = logging.getLogger(__name__)

STATUS_TYPE = "ShardLease"
TRIM_HORIZON = "TRIM_HORIZON"
SHARD_END = "SHARD_END"
PK_NAMES = ("StreamId", "StatusType", "StatusValue")
STATUS_SCHEMA_ERROR = "StreamWorkerStatusTableSchema"
LEASE_LOST_ERROR = "StreamWorkerLeaseLost"


class LeaseLostError(TablestoreClientError):
    """The lease changed under us (another worker took it): stop consuming the shard."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=LEASE_LOST_ERROR)


@dataclass(frozen=True)
class Lease:
    """One row of the status table."""

    stream_id: str
    shard_id: str
    checkpoint: str = TRIM_HORIZON
    counter: int = 0
    owner: str = ""
    stealer: str = ""
    parent_shard_ids: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.checkpoint == SHARD_END


Written = list[bool | Exception]
"""Per batched write: True, False where its condition failed (the row changed), or the row's error."""
Updated = list[Lease | None | Exception]
"""Per batched lease update: the updated lease, None where it was lost, or the row's error."""


class LeaseManager:
    """CRUD of leases over ``TableClient``; every update is conditional on ``LeaseCounter`` (and owner)."""

    def __init__(self, client: TableClient, table: str) -> None:
        self.client = client
        self.table = table

    # -- table ------------------------------------------------------------------------------------------
    def ensure_table(self) -> None:
        """Create the status table if missing; refuse a same-named table with another primary key."""
        if self.table not in self.client.list_tables():
            schema = TableSchema(
                self.table, tuple(PrimaryKeyColumn(n, PrimaryKeyType.STRING) for n in PK_NAMES)
            )
            try:
                self.client.create_table(schema)
                log.info("created stream worker status table %s", self.table)
            except Exception:  # noqa: BLE001 - a concurrent worker may have created it; verified below
                if self.table not in self.client.list_tables():
                    raise
        pk = self.client.describe_table(self.table).schema.primary_key
        got = [(c.name, PrimaryKeyType(c.type)) for c in pk]
        want = [(n, PrimaryKeyType.STRING) for n in PK_NAMES]
        if got != want:
            raise TablestoreClientError(
                f"status table {self.table!r} exists with primary key {[f'{n}:{t.value}' for n, t in got]} "
                f"instead of {[f'{n}:STRING' for n in PK_NAMES]}; choose another status_table name",
                code=STATUS_SCHEMA_ERROR,
            )

    # -- reads ------------------------------------------------------------------------------------------
    def list(self, stream_id: str) -> list[Lease]:
        start = [("StreamId", stream_id), ("StatusType", STATUS_TYPE), ("StatusValue", INF_MIN)]
        end = [("StreamId", stream_id), ("StatusType", STATUS_TYPE), ("StatusValue", INF_MAX)]
        return [_lease(row) for row in self.client.iter_range(self.table, start, end)]

    def get(self, stream_id: str, shard_id: str) -> Lease | None:
        row = self.client.get_row(self.table, _pk(stream_id, shard_id))
        return _lease(row) if row is not None else None

    # -- writes ---------------------------------------------------------------------------------------------
    # Creating, taking and renewing leases go 200 to a BatchWriteRow (each row keeps its own condition): their
    # requests grow with shards / 200, not with shards. A shard's own writes (checkpoint, release, steal) are one
    # row each.
    def create_all(self, leases: Sequence[Lease]) -> Written:
        """Insert new leases: per lease True, False where one already exists, or the row's error."""
        writes = [RowWrite(self.table, WriteType.PUT, normalize_primary_key(_pk(lease.stream_id, lease.shard_id)),
                           normalize_columns(_columns(lease)), Condition(RowExistence.EXPECT_NOT_EXIST))
                  for lease in leases]
        return self._batch(writes)

    def take_all(self, leases: Sequence[Lease], worker_id: str) -> Updated:
        """Take free or expired leases (each conditional on the counter we observed): per lease the taken
        lease, None where another worker changed it first, or the row's error."""
        return self._update_all([
            (lease, replace(lease, counter=lease.counter + 1, owner=worker_id, stealer=""),
             ("LeaseCounter", "LeaseOwner", "LeaseStealer")) for lease in leases])

    def renew_all(self, leases: Sequence[Lease]) -> Updated:
        """Heartbeat: bump each lease's counter while we still own it; per lease the renewed lease, None where
        it was lost, or the row's error (not renewed this time)."""
        return self._update_all([(lease, replace(lease, counter=lease.counter + 1), ("LeaseCounter",))
                                 for lease in leases])

    def _update_all(self, changes: Sequence[tuple[Lease, Lease, tuple[str, ...]]]
                    ) -> Updated:
        outcomes = self._batch([self._write(old, new, changed, expect_owner=old.owner)
                                for old, new, changed in changes])
        return [new if outcome is True else None if outcome is False else outcome
                for (_, new, _), outcome in zip(changes, outcomes, strict=True)]

    def _batch(self, writes: Sequence[RowWrite]) -> Written:
        """Send ``writes`` in batches: per write True, False where its condition failed, or its error."""
        outcomes: Written = []
        for first in range(0, len(writes), MAX_BATCH_WRITE_ROWS):
            for result in self.client.batch_write_row(writes[first:first + MAX_BATCH_WRITE_ROWS]):
                if result.ok or result.error is None:
                    outcomes.append(result.ok)
                else:
                    lost = isinstance(result.error, ConditionFailedError | NotFoundError)
                    outcomes.append(False if lost else result.error)
        return outcomes

    def _write(self, old: Lease, new: Lease, changed: tuple[str, ...], *, expect_owner: str | None) -> RowWrite:
        """The conditional update writing the ``changed`` attributes of ``new`` if the row still has ``old``'s
        counter (and owner)."""
        checks: list[Any] = [SingleColumnCondition("LeaseCounter", Comparator.EQUAL, old.counter, False)]
        if expect_owner is not None:
            checks.append(SingleColumnCondition("LeaseOwner", Comparator.EQUAL, expect_owner, False))
        cc: Any = (
            checks[0] if len(checks) == 1 else CompositeColumnCondition(LogicalOperator.AND, tuple(checks))
        )
        columns = {name: value for name, value in _columns(new).items() if name in changed}
        return RowWrite(self.table, WriteType.UPDATE, normalize_primary_key(_pk(old.stream_id, old.shard_id)),
                        normalize_columns(columns), Condition(RowExistence.EXPECT_EXIST, cc))

    def _update(self, old: Lease, new: Lease, changed: tuple[str, ...], *, expect_owner: str | None) -> Lease:
        """Write only the ``changed`` attributes of ``new``, if the row still has ``old``'s counter/owner."""
        write = self._write(old, new, changed, expect_owner=expect_owner)
        try:
            self.client.update_row(self.table, write.primary_key, write.columns, condition=write.condition)
        except (ConditionFailedError, NotFoundError) as exc:
            raise LeaseLostError(f"lease of shard {old.shard_id} changed (counter {old.counter}, owner "
                                 f"{old.owner!r}): {exc.code}") from None
        return new

    def checkpoint(self, lease: Lease, value: str) -> Lease:
        new = replace(lease, counter=lease.counter + 1, checkpoint=value)
        changed: tuple[str, ...] = ("LeaseCounter", "Checkpoint")
        if value == SHARD_END:
            new = replace(new, owner="", stealer="")
            changed += ("LeaseOwner", "LeaseStealer")
        return self._update(lease, new, changed, expect_owner=lease.owner)

    def release(self, lease: Lease, to: str = "") -> Lease:
        """Give the lease up: to ``to`` (the worker that asked for it), or free (``""``)."""
        new = replace(lease, counter=lease.counter + 1, owner=to, stealer="")
        return self._update(
            lease, new, ("LeaseCounter", "LeaseOwner", "LeaseStealer"), expect_owner=lease.owner
        )

    def request_steal(self, lease: Lease, worker_id: str) -> Lease:
        """Ask the owner to hand the lease over (balancing); the counter is left alone."""
        return self._update(
            lease, replace(lease, stealer=worker_id), ("LeaseStealer",), expect_owner=lease.owner
        )


def _pk(stream_id: str, shard_id: str) -> list[tuple[str, str]]:
    return [("StreamId", stream_id), ("StatusType", STATUS_TYPE), ("StatusValue", shard_id)]


def _columns(lease: Lease) -> dict[str, Any]:
    return {
        "Checkpoint": lease.checkpoint,
        "LeaseCounter": lease.counter,
        "LeaseOwner": lease.owner,
        "LeaseStealer": lease.stealer,
        "ParentShardIds": json.dumps(list(lease.parent_shard_ids)),
    }


def _lease(row: Any) -> Lease:
    pk = dict(row.primary_key)
    return Lease(
        stream_id=str(pk["StreamId"]),
        shard_id=str(pk["StatusValue"]),
        checkpoint=str(row.get("Checkpoint", TRIM_HORIZON)),
        counter=int(row.get("LeaseCounter", 0)),
        owner=str(row.get("LeaseOwner", "")),
        stealer=str(row.get("LeaseStealer", "")),
        parent_shard_ids=tuple(json.loads(row.get("ParentShardIds", "[]"))),
    )
