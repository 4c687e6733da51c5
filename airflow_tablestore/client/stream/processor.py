"""What users implement: a :class:`RecordProcessor` per shard, fed in order, checkpointing when it likes."""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from typing import NamedTuple, Protocol

from airflow_tablestore.client.model import Record


class ShutdownReason(enum.StrEnum):
    """Why a processor is shut down.

    * ``TERMINATE``: the shard is closed (split/merge) and every record was delivered; call
      ``checkpointer.checkpoint()`` to mark it finished — children shards start only then.
    * ``LEASE_LOST``: another worker owns the shard now; the checkpointer refuses to write.
    * ``REQUESTED``: the worker gives the shard up (worker shutdown, or load balancing); checkpoint if you
      want.
    """

    TERMINATE = "TERMINATE"
    LEASE_LOST = "LEASE_LOST"
    REQUESTED = "REQUESTED"


class ShardInfo(NamedTuple):
    """The shard a processor consumes and where it starts (``checkpoint`` as stored in the status table)."""

    stream_id: str
    table_name: str
    shard_id: str
    parent_shard_ids: tuple[str, ...]
    checkpoint: str
    worker_id: str


class Checkpointer(Protocol):
    """Stores a shard's progress in the status table (conditional on still owning the lease)."""

    def checkpoint(self, point: Record | str | None = None) -> None:
        """``None``: after the last delivered record (the largest permitted point; at TERMINATE it marks the
        shard finished). A delivered :class:`Record`: just after it. Raises ``LeaseLostError`` when the lease
        is gone and ``ValueError`` for a point beyond what was delivered."""


class RecordProcessor(abc.ABC):
    """Consumes one shard. Delivery is at least once and in order: after a restart or a takeover, records
    after the last checkpoint are delivered again. Raising from :meth:`process_records` re-delivers the same
    batch after a back-off (never skipped)."""

    def initialize(self, shard: ShardInfo) -> None:  # noqa: B027 - optional hook
        """Called once before the first batch."""

    @abc.abstractmethod
    def process_records(self, records: list[Record], checkpointer: Checkpointer) -> None:
        """Handle one non-empty batch of the shard, in order."""

    def shutdown(self, reason: ShutdownReason, checkpointer: Checkpointer) -> None:  # noqa: B027
        """Called once at the end; see :class:`ShutdownReason`."""


class CallbackRecordProcessor(RecordProcessor):
    """A processor from a function ``fn(shard, records)``; checkpoints after every batch (configurable) and
    marks the shard finished at TERMINATE."""

    def __init__(self, fn: Callable[[ShardInfo, list[Record]], None], *, checkpoint_every: int = 1) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        self._fn = fn
        self._every = checkpoint_every
        self._batches = 0
        self.shard: ShardInfo | None = None

    def initialize(self, shard: ShardInfo) -> None:
        self.shard = shard

    def process_records(self, records: list[Record], checkpointer: Checkpointer) -> None:
        assert self.shard is not None
        self._fn(self.shard, records)
        self._batches += 1
        if self._batches % self._every == 0:
            checkpointer.checkpoint()

    def shutdown(self, reason: ShutdownReason, checkpointer: Checkpointer) -> None:
        if reason is not ShutdownReason.LEASE_LOST:
            checkpointer.checkpoint()


ProcessorFactory = Callable[[ShardInfo], RecordProcessor]
"""Builds one processor per shard consumer."""
