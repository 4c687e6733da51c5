"""The base of the Tablestore hooks: a ``tablestore`` Airflow connection parsed into ``ConnectionSettings``.

A ``tablestore`` connection holds the endpoint in ``host`` (``http://`` or ``https://``; a bare host name gets
the extra ``protocol``, ``https`` by default) and ``port``, the AccessKey ID in ``login``, the AccessKey secret
in ``password`` and these extras: ``instance_name`` (required), ``protocol`` (``http`` or ``https``, the scheme
of a bare host; the URI form says it in the host instead, ``tablestore://http://AKID:SECRET@127.0.0.1:8080
?instance_name=emulator``, because Airflow warns about a 4-character extra value when it masks them),
``region`` (switches the client to V4 signing), ``sts_token``, ``connect_timeout`` and ``read_timeout``
(seconds). Problems are reported as
:class:`~airflow_tablestore.client.settings.SettingsError` naming the field (the one settings parser,
``client/settings.py``, checks them as it checks the Spark job's and the data source's); secrets never appear in
messages or reprs.
"""

from __future__ import annotations

import logging
from abc import ABCMeta, abstractmethod
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_tablestore.client.settings import ConnectionSettings, SettingsError, parse_settings
from airflow_tablestore.version_compat import aextra_dejson, amask_secret

log = logging.getLogger(__name__)

DEFAULT_CONN_ID = "tablestore_default"
CONN_TYPE = "tablestore"


def _extra_field(extra: dict[str, Any], name: str) -> Any:
    """Read ``name`` from extras, accepting the legacy ``extra__tablestore__<name>`` form too."""
    value = extra.get(name)
    if value in (None, ""):
        value = extra.get(f"extra__{CONN_TYPE}__{name}")
    return None if value == "" else value


_LABELS = {
    "endpoint": "field 'host' (Endpoint)",
    "access_key_id": "field 'login' (AccessKey ID)",
    "access_key_secret": "field 'password' (AccessKey Secret)",
    **{name: f"extra '{name}'" for name in ("instance_name", "sts_token", "region", "connect_timeout",
                                            "read_timeout", "protocol")},
}
"""How a ``tablestore`` connection names each setting, for the parser's messages."""


def parse_connection(
    conn: Any,
    extra: dict[str, Any],
    *,
    region: str | None = None,
    connect_timeout: float | None = None,
    read_timeout: float | None = None,
) -> ConnectionSettings:
    """An Airflow connection (plus hook-level overrides) as :class:`ConnectionSettings`, through the one parser
    (:func:`~airflow_tablestore.client.settings.parse_settings`; a problem is a ``SettingsError`` naming the
    connection's field)."""
    overrides = {"region": region, "connect_timeout": connect_timeout, "read_timeout": read_timeout}
    values = {
        "endpoint": conn.host,
        "access_key_id": conn.login,
        "access_key_secret": conn.password,
        "instance_name": _extra_field(extra, "instance_name"),
        "sts_token": _extra_field(extra, "sts_token") or _extra_field(extra, "security_token"),
        **{name: value if value is not None else _extra_field(extra, name) for name, value in overrides.items()},
    }
    return parse_settings(values, where=f"connection {getattr(conn, 'conn_id', None) or '?'!r}", labels=_LABELS,
                          port=conn.port, protocol=_extra_field(extra, "protocol"))


class _Closable(Protocol):
    def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


class TablestoreBaseHook(BaseHook, Generic[ClientT], metaclass=ABCMeta):
    """Reads a ``tablestore`` connection; each subclass turns it into its client (:meth:`_create_client`).

    ``get_conn()`` builds the client once (:meth:`_create_client`, abstract here, from the parsed connection)
    and caches it until :meth:`close`; as a context manager the hook closes it on leaving the block::

        with TablestoreTunnelHook("tablestore_default") as hook:
            hook.get_consume_point("orders", "replication")

    To read a connection only (:meth:`get_config`), use either concrete hook: it builds no client until
    ``get_conn()``.

    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's ``region`` extra.
    :param connect_timeout: overrides the ``connect_timeout`` extra (seconds).
    :param read_timeout: overrides the ``read_timeout`` extra (seconds).
    """

    conn_name_attr = "tablestore_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Alibaba Cloud Tablestore"
    #: Constructor arguments (besides the conn id) a trigger needs to rebuild an identical hook.
    hook_param_names: ClassVar[tuple[str, ...]] = ("region", "connect_timeout", "read_timeout")

    def __init__(
        self,
        tablestore_conn_id: str = DEFAULT_CONN_ID,
        *,
        region: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> None:
        super().__init__()
        self.tablestore_conn_id = tablestore_conn_id
        self.region = region
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._config: ConnectionSettings | None = None
        self._client: ClientT | None = None

    @abstractmethod
    def _create_client(self, config: ConnectionSettings) -> ClientT:
        """A new client for ``config`` (each subclass builds its own, importing the client class lazily)."""

    def get_conn(self) -> ClientT:
        """The cached client for this connection."""
        if self._client is None:
            self._client = self._create_client(self.get_config())
        return self._client

    @property
    def conn(self) -> ClientT:
        return self.get_conn()

    def close(self) -> None:
        """Close the cached client (its HTTP connection pool); the next ``get_conn()`` builds a new one."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def forget_connection(self) -> None:
        """Close the client and drop the parsed connection: the next use reads the connection again (a rotated
        secret, a renewed STS token), for long-lived users such as an asset watcher's trigger."""
        self.close()
        self._config = None

    def __enter__(self) -> Self:
        """``with TablestoreHook(...) as hook:`` closes the client when the block ends."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tablestore_conn_id={self.tablestore_conn_id!r})"

    @property
    def hook_params(self) -> dict[str, Any]:
        """The complete hook configuration (conn id + overrides), JSON-serialisable, for triggers."""
        params: dict[str, Any] = {"tablestore_conn_id": self.tablestore_conn_id}
        params.update({name: getattr(self, name) for name in self.hook_param_names})
        return params

    def _overrides(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.hook_param_names}

    def _register(self, config: ConnectionSettings) -> ConnectionSettings:
        from airflow.sdk.log import mask_secret

        mask_secret(config.access_key_secret)
        if config.sts_token:
            mask_secret(config.sts_token)
        log.info(
            "Using Tablestore connection %r: endpoint %s, instance %s, %s signing%s",
            self.tablestore_conn_id, config.endpoint, config.instance_name,
            "V4" if config.region else "V2", ", STS credentials" if config.sts_token else "",
        )
        self._config = config
        return config

    def _undefined(self) -> SettingsError:
        """A connection id no connection has: an argument no retry can fix."""
        name = f"AIRFLOW_CONN_{str(self.tablestore_conn_id).upper()}"
        return SettingsError(
            f"connection {self.tablestore_conn_id!r} is not defined: create it (Admin > Connections, or the "
            f"environment variable {name}) or pass the id of a tablestore connection")

    def get_config(self) -> ConnectionSettings:
        """Parse (once) and return the connection configuration."""
        if self._config is None:
            try:
                conn = self.get_connection(self.tablestore_conn_id)
            except AirflowNotFoundException:
                raise self._undefined() from None
            self._register(parse_connection(conn, conn.extra_dejson, **self._overrides()))
        assert self._config is not None
        return self._config

    async def aget_config(self) -> ConnectionSettings:
        """Async :meth:`get_config` for triggers (uses ``aget_connection``; never blocks the event loop)."""
        if self._config is None:
            try:
                conn = await self.aget_connection(self.tablestore_conn_id)
            except AirflowNotFoundException:
                raise self._undefined() from None
            config = parse_connection(conn, await aextra_dejson(conn), **self._overrides())
            await amask_secret(config.access_key_secret)
            if config.sts_token:
                await amask_secret(config.sts_token)
            self._config = config
        return self._config
