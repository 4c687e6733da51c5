"""Operators that create and delete Tunnel Service tunnels (both idempotent by tunnel name)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import Context

from airflow_tablestore.client.epoch import parse_time_argument
from airflow_tablestore.client.errors import AlreadyExistsError
from airflow_tablestore.client.model import TunnelType
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook, parse_tunnel_type
from airflow_tablestore.operators._lineage import table_lineage
from airflow_tablestore.operators.arguments import check_non_empty, check_table_name
from airflow_tablestore.operators.base import TablestoreBaseOperator, closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast


def _time_ns(argument: str, value: datetime | str | int | None) -> int | None:
    if value in (None, ""):
        return None
    return parse_time_argument(argument, value)


class TablestoreCreateTunnelOperator(TablestoreBaseOperator[TablestoreTunnelHook]):
    """Create a tunnel on a table and push its id to XCom.

    Idempotent by name: when a tunnel with this name exists on the table and has the same type, its id is
    returned; a different type fails with a clear message.

    :param table_name: table the tunnel reads.
    :param tunnel_name: tunnel name (unique per table).
    :param tunnel_type: ``BaseAndStream`` (default), ``BaseData`` or ``Stream``.
    :param stream_start: start of the stream part (datetime, ISO-8601 string or epoch number); default:
        now (the service's "latest").
    :param stream_end: end of the stream part (a Stream tunnel with an end is a backfill tunnel).
    :param enable_stream: enable the table's stream first if it is off (a Stream or BaseAndStream tunnel reads
        it). Off by default, because it changes the source table; without it, such a table fails the task at
        once with ``StreamNotEnabledError`` naming this option and the client call. Idempotent.
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) the tunnel id.
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "tunnel_type",
                                                                "stream_start", "stream_end")
    ui_color = "#ffb35c"

    def __init__(
        self,
        *,
        table_name: str,
        tunnel_name: str,
        tunnel_type: TunnelType | str = TunnelType.BASE_AND_STREAM,
        stream_start: datetime | str | int | None = None,
        stream_end: datetime | str | int | None = None,
        enable_stream: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(enable_stream, bool):
            raise ValueError(f"enable_stream must be True or False, got {enable_stream!r}")
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.enable_stream = enable_stream
        # A templated field: keep the plain value ("BaseAndStream"), not the enum, so the rendered field and
        # the serialized DAG hold a plain string whatever the enum's str() is.
        self.tunnel_type = tunnel_type.value if isinstance(tunnel_type, TunnelType) else tunnel_type
        self.stream_start = stream_start
        self.stream_end = stream_end

    @closes_hooks
    def execute(self, context: Context) -> str:
        with fail_fast():
            return self._create(context)

    def _create(self, context: Context) -> str:
        check_table_name("table_name", self.table_name)
        check_non_empty("tunnel_name", self.tunnel_name)
        wanted = parse_tunnel_type(self.tunnel_type)
        start, end = _time_ns("stream_start", self.stream_start), _time_ns("stream_end", self.stream_end)
        tunnel_id = self.hook.existing_tunnel_id(self.table_name, self.tunnel_name, wanted)
        if tunnel_id is not None:
            self.log.info("Tunnel %r on %r already exists: %s", self.tunnel_name, self.table_name, tunnel_id)
            return tunnel_id
        if self.enable_stream and wanted != TunnelType.BASE_DATA and self.hook.enable_stream(self.table_name):
            self.log.info("Enabled the stream of %r (enable_stream=True)", self.table_name)
        try:
            tunnel_id = self.hook.create_tunnel(
                self.table_name, self.tunnel_name, wanted, stream_start=start, stream_end=end
            )
        except AlreadyExistsError:
            tunnel_id = self.hook.existing_tunnel_id(self.table_name, self.tunnel_name, wanted)
            if tunnel_id is None:
                raise
            self.log.info("Tunnel %r was created concurrently: %s", self.tunnel_name, tunnel_id)
            return tunnel_id
        self.log.info("Created %s tunnel %r on %r: %s", wanted.value, self.tunnel_name, self.table_name,
                      tunnel_id)
        return tunnel_id

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Lineage: the tunnel's table as input (the tunnel reads it)."""
        return table_lineage(inputs=[(self.hook.get_config().instance_name, self.table_name)])


class TablestoreDeleteTunnelOperator(TablestoreBaseOperator[TablestoreTunnelHook]):
    """Delete a tunnel (and its checkpoints); succeeds when it is already gone.

    :param table_name: table of the tunnel.
    :param tunnel_name: tunnel name.
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) True if this run deleted the tunnel, False if it was absent.
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name")
    ui_color = "#ffb35c"

    def __init__(
        self,
        *,
        table_name: str,
        tunnel_name: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.tunnel_name = tunnel_name

    @closes_hooks
    def execute(self, context: Context) -> bool:
        with fail_fast():
            check_table_name("table_name", self.table_name)
            check_non_empty("tunnel_name", self.tunnel_name)
            deleted = self.hook.delete_tunnel(self.table_name, self.tunnel_name)
        if deleted:
            self.log.info("Deleted tunnel %r on %r", self.tunnel_name, self.table_name)
        else:
            self.log.info("Tunnel %r on %r does not exist: nothing to delete", self.tunnel_name,
                          self.table_name)
        return deleted
