"""Where spans ended, kept in a small Tablestore table so that the driver learns what the executors read.

A span's end is known only after an executor read it (:mod:`airflow_tablestore.client.tunnel.span`); Spark
gives a read task no way to answer the driver. So the task stores the end under the span's key before it
finishes, and the driver looks it up once Spark committed the batch. Ends are deterministic, so a replayed task
stores the same (or an equal) position again. The table also keeps the skip of each channel's last server
checkpoint (a checkpoint holds a token only), so that a query started without a Spark checkpoint resumes
exactly where the last one stopped.

Rows: primary key (``tunnel_id``, ``key``), one column ``value`` (JSON). The table is created on first use.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from airflow_tablestore.client.backoff import NEW_TABLE_WRITE
from airflow_tablestore.client.errors import AlreadyExistsError, NotFoundError
from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, TableSchema
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.tunnel.span import Position, SpanEnd

log = logging.getLogger(__name__)

DEFAULT_TABLE = "spark_tunnel_positions"
CHECKPOINT_PREFIX = "checkpoint:"
READY_ATTEMPTS = 10


class PositionStore:
    """Span ends and checkpoint skips of the tunnels read by Spark streaming queries, in table ``table``."""

    def __init__(self, settings: ConnectionSettings, table: str = DEFAULT_TABLE, timeout: float = 30.0) -> None:
        self.settings = settings
        self.table = table
        self.client = settings.table_client(timeout=timeout)

    def ensure_table(self) -> None:
        """Create the table unless it exists (the driver does, before any task runs)."""
        if self.table in self.client.list_tables():
            return
        schema = TableSchema(self.table, (PrimaryKeyColumn("tunnel_id", PrimaryKeyType.STRING),
                                          PrimaryKeyColumn("key", PrimaryKeyType.STRING)))
        try:
            self.client.create_table(schema)
            log.info("created table %s for the span ends of Spark streaming queries", self.table)
        except AlreadyExistsError:
            pass

    def _put(self, tunnel_id: str, key: str, value: dict[str, Any]) -> None:
        for attempt in range(READY_ATTEMPTS):
            try:
                self.client.put_row(self.table, [("tunnel_id", tunnel_id), ("key", key)],
                                    [("value", json.dumps(value, sort_keys=True))])
                return
            except NotFoundError:  # a table just created is not writable at once on the service
                if attempt == READY_ATTEMPTS - 1:
                    raise
                time.sleep(NEW_TABLE_WRITE.delay(attempt))

    def _get(self, tunnel_id: str, key: str) -> dict[str, Any] | None:
        row = self.client.get_row(self.table, [("tunnel_id", tunnel_id), ("key", key)])
        if row is None:
            return None
        value = row.get("value")
        return json.loads(value) if isinstance(value, str) else None

    def put_end(self, tunnel_id: str, span_key: str, end: SpanEnd) -> None:
        self._put(tunnel_id, span_key, end.as_dict())

    def get_end(self, tunnel_id: str, span_key: str) -> SpanEnd | None:
        data = self._get(tunnel_id, span_key)
        return SpanEnd.from_dict(data) if data else None

    def delete_end(self, tunnel_id: str, span_key: str) -> None:
        self.client.delete_row(self.table, [("tunnel_id", tunnel_id), ("key", span_key)])

    def put_checkpoint(self, tunnel_id: str, channel_id: str, position: Position, sequence: int,
                       previous: tuple[Position, int] | None = None) -> None:
        """Record that the server checkpoint ``(position.token, sequence)`` of the channel means ``position``.

        Stored *before* the checkpoint itself, with the ``previous`` one: whichever of the two the server holds
        after a crash in between, its skip is known."""
        known = [{**position.as_dict(), "sequence": sequence}]
        if previous is not None:
            known.append({**previous[0].as_dict(), "sequence": previous[1]})
        self._put(tunnel_id, CHECKPOINT_PREFIX + channel_id, {"known": known})

    def checkpoint_position(self, tunnel_id: str, channel_id: str, token: str, sequence: int) -> Position:
        """The exact position of the server checkpoint ``(token, sequence)``: its recorded skip when it is a
        checkpoint this store knows, else the token itself."""
        data = self._get(tunnel_id, CHECKPOINT_PREFIX + channel_id) or {}
        for item in data.get("known", []):
            if item.get("token") == token and int(item.get("sequence", -1)) == sequence:
                return Position(token, int(item.get("skip", 0)))
        return Position(token)

    def close(self) -> None:
        self.client.close()
