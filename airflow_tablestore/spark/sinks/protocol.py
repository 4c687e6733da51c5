"""The sink protocol: what the consumer asks of a sink on the driver (:class:`Sink`) and executors
(:class:`ChannelWriter`).

Writers run inside the Spark task that read the channel, so the data written and the token the driver
checkpoints come from the very same read. After the checkpoint is stored the driver *publishes* the round
(:meth:`Sink.publish`); before it reads a channel it *recovers* (:meth:`Sink.recover`) what a driver that
died between checkpoint and publish left behind. Both sinks are safe under replays, late writes and a second
driver that takes channels over:

* :class:`~airflow_tablestore.spark.sinks.tablestore.TablestoreSink` writes each change conditionally on the
  row's fence column (:mod:`~airflow_tablestore.client.replica`): a change not newer than the row is refused
  by the server. Publishing is a no-op.
* :class:`~airflow_tablestore.spark.sinks.parquet.ParquetSink` stages each round's file under
  ``_staging/`` named by (commit sequence, start token, end token) and moves it into the change log only
  once that exact checkpoint is stored, so the published files are the committed chain of rounds: two
  files never hold the same change.
"""

from __future__ import annotations

from typing import Protocol

from airflow_tablestore.client.records import Records


class ChannelWriter(Protocol):
    """Receives one channel's records of one round, in order (on the executor)."""

    refused: int
    """Writes the sink refused because the destination already held newer state (fenced sinks)."""

    def write(self, records: Records) -> None:
        """Write the next records: one answer's :class:`~airflow_tablestore.client.records.Records` (iterate it
        for decoded records, or build Arrow straight from it)."""
        ...

    def close(self, end_token: str) -> int:
        """Flush everything; ``end_token`` is where the round stopped. Returns the number of records
        written. Raises if anything could not be written."""
        ...

    def abort(self) -> None:
        """The round failed: release resources and leave nothing of it visible (never raises)."""
        ...


class Sink(Protocol):
    """A picklable sink description: :meth:`open` runs on the executors, the rest on the driver."""

    def describe(self) -> str: ...

    def check(self) -> None:
        """Fail fast on the driver when the sink cannot work (missing table, unwritable path)."""
        ...

    def open(self, channel_id: str, start_token: str, sequence: int) -> ChannelWriter:
        """A writer for the round of ``channel_id`` from ``start_token``, to be checkpointed with
        ``sequence``."""
        ...

    def publish(self, channel_id: str, start_token: str, end_token: str, sequence: int) -> None:
        """Make a round visible once its checkpoint (``end_token`` with ``sequence``) is stored."""
        ...

    def recover(self, channel_id: str, token: str, sequence: int) -> None:
        """Given the channel's stored checkpoint, publish the round it committed if that was never published
        and drop staged rounds that can no longer be committed."""
        ...

    def staged_channels(self) -> list[str]:
        """Channels with staged, unpublished output (recovered at start-up)."""
        ...
