"""``TablestoreHook``: the table API of one Tablestore instance, plus the schema helpers operators need."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from airflow_tablestore.client.errors import NotFoundError
from airflow_tablestore.client.model import (
    MAX_TIME_DEVIATION,
    ReservedThroughput,
    TableDescription,
    TableSchema,
)
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.hooks.base import TablestoreBaseHook

if TYPE_CHECKING:
    from airflow_tablestore.client.table.client import TableClient
    from airflow_tablestore.client.verify.report import VerifyReport


class TablestoreHook(TablestoreBaseHook["TableClient"]):
    """Table API hook.

    ``get_conn()`` returns a cached :class:`~airflow_tablestore.client.table.client.TableClient` (use it for
    row operations); the helpers below are idempotency-friendly table management calls.
    """

    def _create_client(self, config: ConnectionSettings) -> TableClient:
        return config.table_client()

    def test_connection(self) -> tuple[bool, str]:
        """List the tables of the instance: ``(True, message)`` when credentials and endpoint work."""
        try:
            tables = self.get_conn().list_tables()
        except Exception as err:  # noqa: BLE001 - report any failure to the UI/CLI as text
            return False, f"{type(err).__name__}: {err}"
        instance = self.get_config().instance_name
        return True, f"Connected to Tablestore instance {instance!r} ({len(tables)} tables)"

    # -- table management ---------------------------------------------------------------------------
    def describe_table(self, table_name: str) -> TableDescription | None:
        """The table's description, or None when it does not exist."""
        try:
            return self.get_conn().describe_table(table_name)
        except NotFoundError:
            return None

    def create_table(self, schema: TableSchema) -> None:
        """CreateTable (raises :class:`AlreadyExistsError` if the name is taken)."""
        self.get_conn().create_table(schema)

    def delete_table(self, table_name: str) -> bool:
        """DeleteTable; returns False when the table was already absent."""
        try:
            self.get_conn().delete_table(table_name)
        except NotFoundError:
            return False
        return True

    def verify_replica(self, source_table: str, replica_table: str, *, replica_hook: TablestoreHook | None = None,
                       **options: Any) -> VerifyReport:
        """Compare ``source_table`` and its replica cell for cell (``replica_hook``: the replica's connection, if
        another); ``options`` as :func:`~airflow_tablestore.client.verify.compare.verify_replica` takes them."""
        from airflow_tablestore.client.verify.compare import verify_replica

        replica = (replica_hook or self).get_conn()
        return verify_replica(self.get_conn(), source_table, replica, replica_table, **options)

    def dataset_uri(self, table_name: str) -> str:
        """``tablestore://<instance>/<table>``: the lineage/asset name of a table."""
        return f"tablestore://{self.get_config().instance_name}/{table_name}"


# -- schema helpers ---------------------------------------------------------------------------------


def replica_schema(
    source: TableDescription, target_name: str, *, raise_max_time_deviation: bool = True
) -> TableSchema:
    """Schema for a replica of ``source``: same primary key, defined columns and options; no stream setting.

    ``max_time_deviation`` is raised to :data:`MAX_TIME_DEVIATION` so original cell versions can be written;
    auto-increment is dropped from primary-key columns (a replica writes the source's key values);
    reserved throughput is not copied (it is billed). The stream is the source's business, not the replica's:
    a replica is created without one and an existing replica's stream is never compared, so enabling the
    source's stream later (as a tunnel needs) leaves the replica fit for the next run.
    """
    schema = dataclasses.replace(source.schema, stream=None)
    options = schema.options
    if raise_max_time_deviation:
        options = dataclasses.replace(options, max_time_deviation=MAX_TIME_DEVIATION)
    primary_key = tuple(dataclasses.replace(col, auto_increment=False) for col in schema.primary_key)
    return dataclasses.replace(
        schema,
        name=target_name,
        primary_key=primary_key,
        options=options,
        reserved_throughput=ReservedThroughput(),
    )


def schema_differences(existing: TableDescription, wanted: TableSchema) -> list[str]:
    """Human-readable differences that make ``existing`` unfit where ``wanted`` was asked for.

    Compared: primary key (names, types, order, auto-increment), defined columns, table options and
    whether the stream is enabled (only when ``wanted`` says something about the stream). Reserved
    throughput is ignored.
    """
    have = existing.schema
    diffs: list[str] = []

    def pk(cols: tuple[Any, ...]) -> list[str]:
        return [f"{c.name}:{c.type.value}{'(auto-increment)' if c.auto_increment else ''}" for c in cols]

    if pk(have.primary_key) != pk(wanted.primary_key):
        diffs.append(f"primary key is {pk(have.primary_key)}, wanted {pk(wanted.primary_key)}")
    have_cols = {c.name: c.type.value for c in have.defined_columns}
    want_cols = {c.name: c.type.value for c in wanted.defined_columns}
    if have_cols != want_cols:
        diffs.append(f"defined columns are {have_cols}, wanted {want_cols}")
    for option in dataclasses.fields(wanted.options):
        have_value = getattr(have.options, option.name)
        want_value = getattr(wanted.options, option.name)
        if have_value != want_value:
            diffs.append(f"option {option.name} is {have_value}, wanted {want_value}")
    if wanted.stream is not None and wanted.stream.enabled != existing.stream.enabled:
        diffs.append(f"stream enabled is {existing.stream.enabled}, wanted {wanted.stream.enabled}")
    return diffs
