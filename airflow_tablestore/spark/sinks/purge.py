"""The tombstone purge: delete a fenced replica's tombstones once no late or stale write can still reach them.

A deleted row stays in the replica as a *tombstone* (:mod:`.fence`) so that an older change arriving later is
refused instead of resurrecting the row. Such a change comes from two kinds of writers:

* a **replayed round** (the consumer died before its checkpoint, or a channel failed): the replay re-sends the
  round's changes *in order*, so it re-sends the delete after the older change and ends with the tombstone
  again. A purge cannot make a replay's end result wrong.
* a **stale writer**: a consumer whose tunnel client the server dropped (killed, paused, cut off) while its
  Spark task still held changes it had read, or a request the network or the server held. Nothing re-sends the
  delete after it, so its tombstone must outlive it. The server drops a client at most ``client_timeout``
  after its last heartbeat (``heartbeat_interval`` apart), and only then hands its channels to the consumer
  that writes the tombstone; the dropped client's task reads nothing more (its next ReadRecords is refused) and
  writes only what it holds: at most one round of one channel (``records_per_channel``, rounded up to whole
  ReadRecords answers: the formula's extra batch covers 200 records past the bound; a service whose answers
  are larger makes a stale round longer, which a horizon of days leaves room for), in batches of ≤ 200 rows,
  each request waited for at most the client's retry budget plus ``request_timeout`` and retried at most
  :data:`WRITE_ATTEMPTS` times. The client's timeouts bound only how long it waits, not when the server runs a
  request: the horizon *assumes* the server executes or fails a request within one such request time of its
  sending (nothing the client controls guarantees it; the emulator executes a request once read, and only its
  injected ``delay_s`` faults hold one longer). With that, a tombstone whose cell (written by the server's clock)
  is older than :func:`minimum_horizon_s` can no longer be reached by a stale write, up to the clock skew
  between the purging host and the server (:data:`CLOCK_SKEW_S`).

:func:`purge_tombstones` scans the replica's fence column only, and deletes each tombstone older than the
horizon *conditionally* (the fence must still be exactly the tombstone), so a row the source re-created
meanwhile is never deleted. The consumer runs it after a run with ``--purge-tombstones-after SECONDS``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.model import (
    INF_MAX,
    INF_MIN,
    Comparator,
    Condition,
    RowExistence,
    RowWrite,
    SingleColumnCondition,
    WriteType,
)
from airflow_tablestore.client.replica import is_tombstone, write_fenced
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.table.batch_write import MAX_BATCH_WRITE_ROWS

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
"""Tries of one row write by the sink (``write_rows``' ``max_attempts``)."""

ROW_RETRY_MAX_WAIT_S = RetryPolicy().max_delay_s
"""The longest wait between two tries of a row."""

CLOCK_SKEW_S = 60.0
"""Allowed difference between the purging host's clock and the server's (NTP keeps it far smaller)."""

DELETE_CHUNK = 1000


def minimum_horizon_s(*, request_timeout: float, client_timeout: float, heartbeat_interval: float,
                      records_per_channel: int, retry_budget_s: float | None = None) -> float:
    """The youngest a tombstone may be when it is purged (see the module docstring for why)::

        client_timeout + heartbeat_interval              a stale consumer's client is dropped
        + call                                           its last ReadRecords, in flight
        + batches * WRITE_ATTEMPTS * (call + wait)       it writes the round it holds
        + CLOCK_SKEW_S

    where ``call = retry_budget_s + request_timeout`` (one request with the client's own retries) and
    ``batches = ceil(records_per_channel / 200) + 1``.
    """
    budget = RetryPolicy().total_budget_s if retry_budget_s is None else retry_budget_s
    call = budget + request_timeout
    batches = math.ceil(records_per_channel / MAX_BATCH_WRITE_ROWS) + 1
    return client_timeout + heartbeat_interval + call + batches * WRITE_ATTEMPTS * (call + ROW_RETRY_MAX_WAIT_S) \
        + CLOCK_SKEW_S


@dataclass
class PurgeResult:
    """What a purge saw and did."""

    rows: int = 0
    tombstones: int = 0
    purged: int = 0
    young: int = 0
    changed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _candidates(client: Any, table: str, fence_column: str, cutoff_ms: int, result: PurgeResult,
                page_rows: int) -> Iterator[RowWrite]:
    start = tuple((c.name, INF_MIN) for c in client.describe_table(table).schema.primary_key)
    end = tuple((name, INF_MAX) for name, _ in start)
    for row in client.iter_range(table, start, end, columns=[fence_column], max_versions=1, page_size=page_rows):
        result.rows += 1
        if not is_tombstone(row.columns, fence_column):  # the scan reads the fence column alone
            continue
        fence = row.columns[0]  # the newest (and, at max_versions=1, only) fence cell
        result.tombstones += 1
        if fence.timestamp is None or fence.timestamp >= cutoff_ms:
            result.young += 1
            continue
        still = SingleColumnCondition(fence_column, Comparator.EQUAL, fence.value, pass_if_missing=False)
        yield RowWrite(table, WriteType.DELETE, row.primary_key, (), Condition(RowExistence.IGNORE, still))


def purge_tombstones(client: Any, table: str, fence_column: str, horizon_s: float, *, now_ms: int | None = None,
                     page_rows: int = 5000) -> PurgeResult:
    """Delete the tombstones of ``table`` written more than ``horizon_s`` before ``now_ms`` (default: this host's
    clock), each only if its fence is still the tombstone's. ``client`` is a ``TableClient``."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff_ms = now - int(horizon_s * 1000)
    result = PurgeResult()
    chunk: list[RowWrite] = []
    for write in _candidates(client, table, fence_column, cutoff_ms, result, page_rows):
        chunk.append(write)
        if len(chunk) >= DELETE_CHUNK:
            _delete(client, chunk, result)
            chunk = []
    _delete(client, chunk, result)
    log.info("tombstone purge of %s: %d row(s) scanned, %d tombstone(s), %d purged, %d younger than %.0fs, "
             "%d changed meanwhile", table, result.rows, result.tombstones, result.purged, result.young, horizon_s,
             result.changed)
    return result


def _delete(client: Any, chunk: list[RowWrite], result: PurgeResult) -> None:
    if not chunk:
        return
    # Refused: the row changed since the scan (a newer change landed) or a retried delete had already landed.
    changed = write_fenced(client, chunk)
    result.changed += changed
    result.purged += len(chunk) - changed
