"""``TablestoreTunnelHook``: Tunnel Service management and the consume-point check used by the sensor.

The verdict and its messages are in :mod:`airflow_tablestore.client.tunnel.consume_point`; time values are parsed by
:func:`airflow_tablestore.client.epoch.parse_epoch_ns`.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_tablestore.client.errors import NotFoundError, TablestoreClientError
from airflow_tablestore.client.model import StreamSpec, TunnelDescription, TunnelType
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.tunnel import consume_point
from airflow_tablestore.hooks.base import TablestoreBaseHook

if TYPE_CHECKING:
    from airflow_tablestore.client.tunnel.client import TunnelClient


class TablestoreTunnelHook(TablestoreBaseHook["TunnelClient"]):
    """Tunnel Service hook.

    ``get_conn()`` returns a cached :class:`~airflow_tablestore.client.tunnel.client.TunnelClient`.
    """

    def _create_client(self, config: ConnectionSettings) -> TunnelClient:
        return config.tunnel_client()

    def test_connection(self) -> tuple[bool, str]:
        """List the tunnels of the instance: ``(True, message)`` when credentials and endpoint work."""
        try:
            tunnels = self.get_conn().list_tunnels()
        except Exception as err:  # noqa: BLE001 - report any failure to the UI/CLI as text
            return False, f"{type(err).__name__}: {err}"
        instance = self.get_config().instance_name
        return True, f"Connected to Tablestore instance {instance!r} ({len(tunnels)} tunnels)"

    # -- management ---------------------------------------------------------------------------------
    def find_tunnel(self, table_name: str, tunnel_name: str) -> TunnelDescription | None:
        """DescribeTunnel, or None when the tunnel (or its table) does not exist."""
        try:
            return self.get_conn().describe_tunnel(table_name, tunnel_name)
        except NotFoundError:
            return None

    def existing_tunnel_id(self, table_name: str, tunnel_name: str,
                           tunnel_type: TunnelType | str) -> str | None:
        """The id of the tunnel with this name, None when there is none; raises :class:`TablestoreClientError`
        when it exists with another type (so an idempotent create never reuses the wrong kind of tunnel)."""
        wanted = parse_tunnel_type(tunnel_type)
        existing = self.find_tunnel(table_name, tunnel_name)
        if existing is None:
            return None
        if existing.tunnel.tunnel_type != wanted:
            raise TablestoreClientError(
                f"tunnel {tunnel_name!r} on table {table_name!r} already exists with type "
                f"{existing.tunnel.tunnel_type.value}, wanted {wanted.value}: delete it or choose another "
                "name"
            )
        return existing.tunnel.tunnel_id

    def enable_stream(self, table_name: str) -> bool:
        """Enable ``table_name``'s stream (the service's longest retention, 168 hours) unless it is on; True when
        this call enabled it."""
        from airflow_tablestore.client.table.client import TableClient

        tables = TableClient(transport=self.get_conn().transport)  # borrows the tunnel client's connection
        if tables.describe_table(table_name).stream.enabled:
            return False
        tables.update_table(table_name, stream=StreamSpec(enabled=True))
        return True

    def create_tunnel(
        self,
        table_name: str,
        tunnel_name: str,
        tunnel_type: TunnelType | str = TunnelType.BASE_AND_STREAM,
        *,
        stream_start: datetime | int | None = None,
        stream_end: datetime | int | None = None,
    ) -> str:
        """CreateTunnel; returns the new tunnel id (raises :class:`AlreadyExistsError` if the name is
        taken)."""
        return self.get_conn().create_tunnel(
            table_name, tunnel_name, parse_tunnel_type(tunnel_type), stream_start=stream_start,
            stream_end=stream_end,
        )

    def delete_tunnel(self, table_name: str, tunnel_name: str) -> bool:
        """DeleteTunnel; returns False when the tunnel (or its table) was already absent."""
        try:
            self.get_conn().delete_tunnel(table_name, tunnel_name)
        except NotFoundError:
            return False
        return True

    # -- consume point ------------------------------------------------------------------------------
    def get_consume_point(self, table_name: str, tunnel_name: str) -> int:
        """The tunnel consume point in nanoseconds since epoch (0 while no stream record was consumed)."""
        return self.get_conn().describe_tunnel(table_name, tunnel_name).consume_point_ns

    def check_consume_point(self, table_name: str, tunnel_name: str,
                            cutoff_ns: int) -> consume_point.ConsumePointCheck:
        """One synchronous check; raises :class:`TunnelNotFoundError`/:class:`TunnelExpiredError`."""
        description = self.get_conn().describe_tunnel(table_name, tunnel_name)
        return consume_point.evaluate_consume_point(description, cutoff_ns)

    async def acheck_consume_point(self, table_name: str, tunnel_name: str,
                                   cutoff_ns: int) -> consume_point.ConsumePointCheck:
        """Async :meth:`check_consume_point`: connection read with ``aget_connection``, HTTP in a thread."""
        await self.aget_config()
        client = self.get_conn()  # config is cached: no synchronous connection lookup happens here
        description = await asyncio.to_thread(client.describe_tunnel, table_name, tunnel_name)
        return consume_point.evaluate_consume_point(description, cutoff_ns)


def parse_tunnel_type(value: TunnelType | str) -> TunnelType:
    """The :class:`TunnelType` named by ``value`` (its wire value); a ValueError lists the valid names."""
    try:
        return TunnelType(value)
    except ValueError:
        valid = [t.value for t in TunnelType]
        raise ValueError(f"tunnel_type must be one of {valid}, got {value!r}") from None
