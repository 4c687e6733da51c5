"""``BaseClient``: the base class of the API clients (construction, ``close`` and context-manager plumbing).

``TableClient``, ``TunnelClient`` and ``StreamClient`` are all built either from the endpoint and AccessKey
(``region`` switches to V4 signing, ``sts_token`` adds an STS token) — then the client owns its
:class:`Transport` and closes it — or from an existing ``transport=``, which they borrow and never close.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from airflow_tablestore.client.auth import Credentials
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.transport import DEFAULT_TIMEOUT, Transport


class BaseClient:
    """Base of the API clients: owns (or borrows) one :class:`Transport`; ``timeout=None`` means the
    default."""

    def __init__(
        self,
        endpoint: str | None = None,
        access_key_id: str | None = None,
        access_key_secret: str | None = None,
        instance_name: str | None = None,
        *,
        sts_token: str | None = None,
        region: str | None = None,
        timeout: float | tuple[float, float] | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: Transport | None = None,
    ) -> None:
        if transport is not None:
            self._transport = transport
            self._owns_transport = False
            return
        if not (endpoint and access_key_id and access_key_secret and instance_name):
            raise TablestoreClientError(
                f"{type(self).__name__} needs endpoint, access_key_id, access_key_secret and instance_name "
                "(or an existing transport=)"
            )
        credentials = Credentials(access_key_id, access_key_secret, sts_token=sts_token, region=region)
        self._transport = Transport(
            endpoint, credentials, instance_name, timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            retry=retry,
        )
        self._owns_transport = True

    @property
    def transport(self) -> Transport:
        """The underlying transport (share it: ``TunnelClient(transport=client.transport)``)."""
        return self._transport

    def __repr__(self) -> str:
        return f"{type(self).__name__}(transport={self._transport!r})"

    def close(self) -> None:
        """Close the transport if this client created it."""
        if self._owns_transport:
            self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
