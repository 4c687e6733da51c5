"""What users implement: a :class:`ChannelProcessor` receives each channel's records in order."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import NamedTuple

from airflow_tablestore.client.model import Record


class ChannelContext(NamedTuple):
    """What a processor is told about a batch (why its own type: processors never see worker internals).

    Where a batch comes from. ``start_token`` → ``next_token`` is the batch's token range; checkpointing
    ``next_token`` acknowledges it. ``trace_id`` identifies the channel consumer in logs."""

    tunnel_id: str
    client_id: str
    channel_id: str
    channel_type: str  # "BaseData" | "Stream"
    start_token: str
    next_token: str
    trace_id: str


class ChannelProcessor(abc.ABC):
    """Consumes one channel's batches. Raising from :meth:`process` closes the channel: everything after its
    last checkpoint is delivered again later (possibly to another worker) — at least once, in order."""

    @abc.abstractmethod
    def process(self, records: list[Record], context: ChannelContext) -> None:
        """Handle one non-empty batch. Return only when it is durably handled."""

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Called once when the processor is retired (its channel closed, or the worker stopped)."""


class CallbackProcessor(ChannelProcessor):
    """A processor from a plain function ``fn(records, context)``."""

    def __init__(self, fn: Callable[[list[Record], ChannelContext], None],
                 on_shutdown: Callable[[], None] | None = None) -> None:
        self._fn = fn
        self._on_shutdown = on_shutdown

    def process(self, records: list[Record], context: ChannelContext) -> None:
        self._fn(records, context)

    def shutdown(self) -> None:
        if self._on_shutdown is not None:
            self._on_shutdown()


ProcessorFactory = Callable[[ChannelContext], ChannelProcessor]
"""Builds one processor per channel consumer (the context's token fields hold the start token)."""
