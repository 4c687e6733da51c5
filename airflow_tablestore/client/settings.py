"""``ConnectionSettings``: where one Tablestore instance is and how to sign for it (the one settings type).

The Airflow hooks parse a connection into it, the Spark job reads it from a credentials file or environment
variables, and the DAG passes it between them; every client is built from
:meth:`ConnectionSettings.client_kwargs`. The repr masks the AccessKey secret and the STS token. It is
picklable, so Spark tasks receive it inside their closures (never through the Spark conf or argv, which the
Spark UI and process listings show).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tablestore.client.transport import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient

DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_READ_TIMEOUT_S = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class ConnectionSettings:
    """Endpoint, instance, credentials and (optional) timeouts of one Tablestore instance.

    ``region`` switches the clients to V4 signing; ``sts_token`` adds an STS token; ``connect_timeout`` and
    ``read_timeout`` (seconds) override the clients' defaults when either is set.
    """

    endpoint: str
    instance_name: str
    access_key_id: str
    access_key_secret: str = field(repr=False)
    sts_token: str | None = field(default=None, repr=False)
    region: str | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(endpoint={self.endpoint!r}, instance_name={self.instance_name!r}, "
            f"access_key_id={self.access_key_id!r}, access_key_secret='***', "
            f"sts_token={'***' if self.sts_token else None!r}, region={self.region!r}, "
            f"connect_timeout={self.connect_timeout!r}, read_timeout={self.read_timeout!r})"
        )

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``TableClient``/``TunnelClient``/``StreamClient``."""
        kwargs: dict[str, Any] = {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key_id,
            "access_key_secret": self.access_key_secret,
            "instance_name": self.instance_name,
            "sts_token": self.sts_token,
            "region": self.region,
        }
        if self.connect_timeout is not None or self.read_timeout is not None:
            kwargs["timeout"] = (
                self.connect_timeout or DEFAULT_CONNECT_TIMEOUT_S,
                self.read_timeout or DEFAULT_READ_TIMEOUT_S,
            )
        return kwargs

    def _kwargs(self, timeout: float | None) -> dict[str, Any]:
        kwargs = self.client_kwargs()
        if timeout is not None or "timeout" not in kwargs:
            kwargs["timeout"] = timeout
        return kwargs

    def table_client(self, timeout: float | None = None) -> TableClient:
        """A new ``TableClient`` (``timeout=None``: these settings' timeouts, else the client's default)."""
        from airflow_tablestore.client.table.client import TableClient

        return TableClient(**self._kwargs(timeout))

    def tunnel_client(self, timeout: float | None = None) -> TunnelClient:
        """A new ``TunnelClient`` (``timeout=None``: these settings' timeouts, else the client's default)."""
        from airflow_tablestore.client.tunnel.client import TunnelClient

        return TunnelClient(**self._kwargs(timeout))
