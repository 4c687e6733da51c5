"""``ConnectionSettings``: where one Tablestore instance is and how to sign for it (the one settings type), and
:func:`parse_settings`, the one parser of it (with :class:`SettingsError`, the one error of a bad setting).

Every source of settings maps its own names onto :data:`SETTING_NAMES` and calls :func:`parse_settings`: the
Airflow hooks (a connection's fields and extras), ``client/credentials.py`` (``TABLESTORE_*`` variables, a
credentials file) and the Spark data source's options; so every setting, the timeouts included, means the same
and is checked the same wherever it comes from. Every client is built from
:meth:`ConnectionSettings.client_kwargs`. The repr masks the AccessKey secret and the STS token. It is
picklable, so Spark tasks receive it inside their closures (never through the Spark conf or argv, which the
Spark UI and process listings show).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.transport import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.tunnel.client import TunnelClient

DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_READ_TIMEOUT_S = DEFAULT_TIMEOUT

SETTING_NAMES = (
    "endpoint", "instance_name", "access_key_id", "access_key_secret", "sts_token", "region", "connect_timeout",
    "read_timeout",
)
"""The settings of one instance, as :class:`ConnectionSettings` names them (every source maps its names onto
these)."""
REQUIRED_SETTINGS = SETTING_NAMES[:4]


class SettingsError(TablestoreClientError, ValueError):
    """Missing or malformed connection settings: the message names the setting as its source calls it (a
    connection field, an environment variable, a file key, a data source option) and never holds a secret. A
    configuration mistake: no retry can fix it."""

    def __init__(self, message: str, code: str = "OTSInvalidConnection", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


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
        if timeout is not None:  # a caller's request timeout is the read timeout; the connect timeout stays
            kwargs["timeout"] = (self.connect_timeout, timeout) if self.connect_timeout else timeout
        elif "timeout" not in kwargs:
            kwargs["timeout"] = None
        return kwargs

    def table_client(self, timeout: float | None = None) -> TableClient:
        """A new ``TableClient`` (``timeout``: the read timeout, with these settings' connect timeout; ``None``:
        these settings' timeouts, else the client's default)."""
        from airflow_tablestore.client.table.client import TableClient

        return TableClient(**self._kwargs(timeout))

    def tunnel_client(self, timeout: float | None = None) -> TunnelClient:
        """A new ``TunnelClient`` (``timeout`` as for :meth:`table_client`)."""
        from airflow_tablestore.client.tunnel.client import TunnelClient

        return TunnelClient(**self._kwargs(timeout))


def normalize_endpoint(host: str | None, port: int | None = None, protocol: str | None = None, *,
                       label: str = "'endpoint'", protocol_label: str = "'protocol'") -> str:
    """The endpoint URL: ``protocol`` (default ``https``) is added to a bare host name, ``port`` when the URL has
    none; anything else than an ``http(s)://host[:port][/path]`` raises :class:`SettingsError` naming ``label``."""
    host = (host or "").strip().rstrip("/")
    if not host:
        raise SettingsError(f"{label} is empty: set it to e.g. https://<instance>.<region>.ots.aliyuncs.com")
    if protocol is not None and protocol not in ("http", "https"):
        raise SettingsError(f"{protocol_label} must be http or https, got {protocol!r}")
    if "://" not in host:
        host = f"{protocol or 'https'}://{host}"
    parts = urlsplit(host)
    if protocol is not None and parts.scheme != protocol:
        raise SettingsError(f"{label} says {parts.scheme}:// but {protocol_label} says {protocol}: keep one of them")
    if parts.scheme not in ("http", "https"):
        raise SettingsError(f"{label} must use http:// or https://, got scheme {parts.scheme!r}")
    if not parts.hostname:
        raise SettingsError(f"{label} has no host name")
    if parts.username or parts.password:
        raise SettingsError(f"{label} must not embed credentials: give the AccessKey separately")
    if parts.query or parts.fragment:
        raise SettingsError(f"{label} must not contain a query string or fragment")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise SettingsError(f"{label} has an invalid port") from None
    netloc = parts.netloc
    if port and parts.port is None:
        netloc = f"{netloc}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def parse_settings(
    values: Mapping[str, Any],
    *,
    where: str,
    labels: Mapping[str, str] | None = None,
    port: int | None = None,
    protocol: Any = None,
    hint: str = "",
) -> ConnectionSettings:
    """Check ``values`` (keyed by :data:`SETTING_NAMES`; ``None`` or ``""`` is unset) into settings.

    ``where`` says where they came from and ``labels`` how that source names each setting (default: the name
    quoted), for the messages of :class:`SettingsError`; ``hint`` ends the message of missing settings. The
    endpoint may be a bare host: ``protocol`` (``labels["protocol"]``) gives its scheme, ``port`` its port. The
    timeouts are positive numbers of seconds (numeric text too).
    """
    def label(name: str) -> str:
        return (labels or {}).get(name, f"'{name}'")

    def given(name: str) -> Any:
        value = values.get(name)
        return None if value is None or value == "" else value

    missing = [label(name) for name in REQUIRED_SETTINGS if given(name) is None]
    if missing:
        raise SettingsError(f"missing Tablestore settings {', '.join(missing)} in {where}{hint}")
    for name in ("endpoint", "instance_name", "access_key_id", "access_key_secret", "sts_token", "region"):
        if given(name) is not None and not isinstance(given(name), str):
            raise SettingsError(f"{where}: {label(name)} must be a string")
    if protocol is not None and not isinstance(protocol, str):
        raise SettingsError(f"{where}: {label('protocol')} must be http or https")
    try:
        endpoint = normalize_endpoint(given("endpoint"), port, protocol.lower() if protocol else None,
                                      label=label("endpoint"), protocol_label=label("protocol"))
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc.message}") from None
    return ConnectionSettings(
        endpoint=endpoint,
        instance_name=given("instance_name"),
        access_key_id=given("access_key_id"),
        access_key_secret=given("access_key_secret"),
        sts_token=given("sts_token"),
        region=given("region"),
        connect_timeout=_seconds(given("connect_timeout"), f"{where}: {label('connect_timeout')}"),
        read_timeout=_seconds(given("read_timeout"), f"{where}: {label('read_timeout')}"),
    )


def _seconds(raw: Any, what: str) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{what} must be a number of seconds, got {raw!r}") from None
    if isinstance(raw, bool) or not value > 0:
        raise SettingsError(f"{what} must be a positive number of seconds, got {raw!r}")
    return value
