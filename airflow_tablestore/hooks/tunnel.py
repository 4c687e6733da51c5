"""``TablestoreTunnelHook``: Tunnel Service management and the consume-point check used by the sensor."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablestore.client.errors import (
    NotFoundError,
    TablestoreClientError,
    TablestoreError,
    TunnelExpiredError,
)
from airflow_tablestore.client.model import TunnelDescription, TunnelType
from airflow_tablestore.client.progress import consumed_through, ns_to_iso
from airflow_tablestore.hooks.base import TablestoreBaseHook, TablestoreConnectionConfig

if TYPE_CHECKING:
    from airflow_tablestore.client.tunnel import TunnelClient


@dataclass(frozen=True)
class ConsumePointCheck:
    """Outcome of one consume-point check; ``consume_point_ns`` is the tunnel consume point (0 = none)."""

    done: bool
    consume_point_ns: int
    tunnel_id: str
    tunnel_type: str
    message: str

    def as_event(self) -> dict[str, Any]:
        """JSON-serialisable form (trigger events, XCom)."""
        return {
            "tunnel_id": self.tunnel_id,
            "tunnel_type": self.tunnel_type,
            "consume_point_ns": self.consume_point_ns,
            "consume_point": ns_to_iso(self.consume_point_ns),
            "message": self.message,
        }


def evaluate_consume_point(description: TunnelDescription, cutoff_ns: int) -> ConsumePointCheck:
    """Decide whether a tunnel has been consumed up to ``cutoff_ns`` (the shared rule:
    :func:`airflow_tablestore.client.progress.consumed_through`). Raises :class:`TunnelExpiredError` for an
    expired tunnel (it will never progress).
    """
    info = description.tunnel
    if info.expired:
        raise TunnelExpiredError(
            "OTSTunnelExpired",
            f"tunnel {info.tunnel_name!r} on table {info.table_name!r} has expired (its stream position fell "
            "out of the stream log retention): delete and recreate it, then reload the data",
        )
    progress = consumed_through(description, cutoff_ns)
    kind = TunnelType(info.tunnel_type)
    return ConsumePointCheck(progress.done, progress.consume_point_ns, info.tunnel_id, kind.value, progress.message)


class TablestoreTunnelHook(TablestoreBaseHook["TunnelClient"]):
    """Tunnel Service hook. ``get_conn()`` returns a cached :class:`~airflow_tablestore.client.tunnel.TunnelClient`."""

    def _create_client(self, config: TablestoreConnectionConfig) -> TunnelClient:
        from airflow_tablestore.client.tunnel import TunnelClient

        return TunnelClient(**config.client_kwargs())

    def test_connection(self) -> tuple[bool, str]:
        """List the tunnels of the instance: ``(True, message)`` when credentials and endpoint work."""
        try:
            tunnels = self.get_conn().list_tunnels()
        except Exception as err:  # noqa: BLE001 - report any failure to the UI/CLI as text
            return False, f"{type(err).__name__}: {err}"
        return True, f"Connected to Tablestore instance {self.get_config().instance_name!r} ({len(tunnels)} tunnels)"

    # -- management ---------------------------------------------------------------------------------
    def find_tunnel(self, table_name: str, tunnel_name: str) -> TunnelDescription | None:
        """DescribeTunnel, or None when the tunnel (or its table) does not exist."""
        try:
            return self.get_conn().describe_tunnel(table_name, tunnel_name)
        except NotFoundError:
            return None

    def existing_tunnel_id(self, table_name: str, tunnel_name: str, tunnel_type: TunnelType | str) -> str | None:
        """The id of the tunnel with this name, None when there is none; raises :class:`TablestoreClientError`
        when it exists with another type (so an idempotent create never reuses the wrong kind of tunnel)."""
        wanted = parse_tunnel_type(tunnel_type)
        existing = self.find_tunnel(table_name, tunnel_name)
        if existing is None:
            return None
        if existing.tunnel.tunnel_type != wanted:
            raise TablestoreClientError(
                f"tunnel {tunnel_name!r} on table {table_name!r} already exists with type "
                f"{existing.tunnel.tunnel_type.value}, wanted {wanted.value}: delete it or choose another name"
            )
        return existing.tunnel.tunnel_id

    def create_tunnel(
        self,
        table_name: str,
        tunnel_name: str,
        tunnel_type: TunnelType | str = TunnelType.BASE_AND_STREAM,
        *,
        stream_start: datetime | int | None = None,
        stream_end: datetime | int | None = None,
    ) -> str:
        """CreateTunnel; returns the new tunnel id (raises :class:`AlreadyExistsError` if the name is taken)."""
        return self.get_conn().create_tunnel(
            table_name, tunnel_name, parse_tunnel_type(tunnel_type), stream_start=stream_start, stream_end=stream_end
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

    def check_consume_point(self, table_name: str, tunnel_name: str, cutoff_ns: int) -> ConsumePointCheck:
        """One synchronous check; raises :class:`TunnelNotFoundError`/:class:`TunnelExpiredError`."""
        return evaluate_consume_point(self.get_conn().describe_tunnel(table_name, tunnel_name), cutoff_ns)

    async def acheck_consume_point(self, table_name: str, tunnel_name: str, cutoff_ns: int) -> ConsumePointCheck:
        """Async :meth:`check_consume_point`: connection read with ``aget_connection``, HTTP in a thread."""
        await self.aget_config()
        client = self.get_conn()  # config is cached: no synchronous connection lookup happens here
        description = await asyncio.to_thread(client.describe_tunnel, table_name, tunnel_name)
        return evaluate_consume_point(description, cutoff_ns)


def parse_tunnel_type(value: TunnelType | str) -> TunnelType:
    """The :class:`TunnelType` named by ``value`` (its wire value); a ValueError lists the valid names."""
    try:
        return TunnelType(value)
    except ValueError:
        raise ValueError(f"tunnel_type must be one of {[t.value for t in TunnelType]}, got {value!r}") from None


def to_epoch_ns(value: datetime | str | int | float | None) -> int:
    """Nanoseconds since epoch from a datetime (naive = UTC), an ISO-8601 string or a number.

    Numbers are read by magnitude: seconds (< 1e11), milliseconds (< 1e14), microseconds (< 1e17), else ns.
    """
    if value is None:
        raise TablestoreClientError("time value is not set")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise TablestoreClientError(f"time value {text!r} is neither ISO-8601 nor a number") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TablestoreClientError(f"time value must be a datetime, ISO-8601 string or epoch number, got {value!r}")
    for limit, factor in ((1e11, 1_000_000_000), (1e14, 1_000_000), (1e17, 1_000)):
        if value < limit:
            return int(value * factor)
    return int(value)


def tunnel_problem_message(err: TablestoreError, table_name: str, tunnel_name: str) -> str:
    """Actionable text for a tunnel that is missing or expired (no retry will fix either)."""
    if isinstance(err, TunnelExpiredError):
        return str(err)
    return (
        f"tunnel {tunnel_name!r} on table {table_name!r} does not exist ({err}): create it first "
        "(TablestoreCreateTunnelOperator) or fix the table/tunnel name"
    )
