"""Operators that create and delete Tablestore tables (both idempotent)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar

from airflow.sdk import Context

from airflow_tablestore.client.errors import AlreadyExistsError, TablestoreClientError
from airflow_tablestore.client.model import (
    ColumnType,
    DefinedColumn,
    PrimaryKeyColumn,
    PrimaryKeyType,
    ReservedThroughput,
    StreamSpec,
    TableOptions,
    TableSchema,
)
from airflow_tablestore.hooks.table import TablestoreHook, replica_schema, schema_differences
from airflow_tablestore.operators._lineage import table_lineage
from airflow_tablestore.operators.arguments import check_table_name
from airflow_tablestore.operators.base import TablestoreBaseOperator, closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast


class TableSchemaMismatchError(TablestoreClientError):
    """The table exists with a schema other than the one asked for."""

    def __init__(self, message: str, code: str = "OTSTableSchemaMismatch", http_status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message, code, http_status, request_id)


PrimaryKeySpec = PrimaryKeyColumn | tuple[str, str] | Mapping[str, Any]
ColumnSpec = DefinedColumn | tuple[str, str] | Mapping[str, Any]


_KindT = TypeVar("_KindT", PrimaryKeyType, ColumnType)


def _kind(enum: type[_KindT], raw: Any, what: str, name: Any) -> _KindT:
    """``raw`` as a member of ``enum``; a ValueError naming the column and listing the valid types if it is not."""
    try:
        return enum(str(raw).upper())
    except ValueError:
        valid = ", ".join(member.value for member in enum)
        label = "primary-key" if enum is PrimaryKeyType else "column"
        raise ValueError(f"{what} {name!r}: type {raw!r} is not a Tablestore {label} type; use one of {valid}") \
            from None


def _name_and_type(spec: Any, what: str) -> tuple[str, Any]:
    if isinstance(spec, Mapping):
        if "name" not in spec or "type" not in spec:
            raise ValueError(f"a {what} given as a dict needs 'name' and 'type', got {dict(spec)!r}")
        return str(spec["name"]), spec["type"]
    if isinstance(spec, (tuple, list)) and len(spec) == 2:
        return str(spec[0]), spec[1]
    raise ValueError(f"a {what} is (name, type) or {{'name': ..., 'type': ...}}, got {spec!r}")


def _primary_key_column(spec: PrimaryKeySpec) -> PrimaryKeyColumn:
    if isinstance(spec, PrimaryKeyColumn):
        return spec
    name, kind = _name_and_type(spec, "primary-key column")
    auto_increment = bool(spec.get("auto_increment", False)) if isinstance(spec, Mapping) else False
    return PrimaryKeyColumn(name, _kind(PrimaryKeyType, kind, "primary-key column", name), auto_increment)


def _defined_column(spec: ColumnSpec) -> DefinedColumn:
    if isinstance(spec, DefinedColumn):
        return spec
    name, kind = _name_and_type(spec, "defined column")
    return DefinedColumn(name, _kind(ColumnType, kind, "defined column", name))


def _fields(cls: type) -> str:
    return ", ".join(field.name for field in dataclasses.fields(cls))


def _options(spec: TableOptions | Mapping[str, Any] | None) -> TableOptions:
    if spec is None:
        return TableOptions()
    if isinstance(spec, TableOptions):
        return spec
    try:
        return TableOptions(**dict(spec))
    except (TypeError, ValueError):
        raise ValueError(f"options must be TableOptions or a dict of its fields ({_fields(TableOptions)}), "
                         f"got {spec!r}") from None


def _stream(spec: StreamSpec | Mapping[str, Any] | bool | None) -> StreamSpec | None:
    if spec is None or isinstance(spec, StreamSpec):
        return spec
    if isinstance(spec, bool):
        return StreamSpec(enabled=spec)
    try:
        values = dict(spec)
        if "columns_to_get" in values:
            values["columns_to_get"] = tuple(values["columns_to_get"])
        return StreamSpec(**values)
    except (TypeError, ValueError):
        raise ValueError(f"stream must be True/False, StreamSpec or a dict of its fields ({_fields(StreamSpec)}), "
                         f"got {spec!r}") from None


def _specs(argument: str, specs: Any) -> Sequence[Any]:
    """``specs`` if it is a list of column specs (not a string or a dict, whose items would be taken apart)."""
    if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Sequence):
        raise ValueError(f"{argument} must be a list of (name, type) or {{'name': ..., 'type': ...}}, "
                         f"got {specs!r}")
    return specs


def _throughput(spec: Any) -> tuple[int, int]:
    if spec is None:
        return 0, 0
    if isinstance(spec, Sequence) and not isinstance(spec, str) and len(spec) == 2 and all(
            isinstance(unit, int) and not isinstance(unit, bool) and unit >= 0 for unit in spec):
        return spec[0], spec[1]
    raise ValueError(f"reserved_throughput must be (read, write) capacity units, two integers >= 0, got {spec!r}")


class TablestoreCreateTableOperator(TablestoreBaseOperator[TablestoreHook]):
    """Create a table from an explicit schema, or as a replica of ``source_table``.

    Idempotent: an existing table with the same schema (primary key, defined columns, options and, when
    given, the stream setting) is accepted; a different one fails with :class:`TableSchemaMismatchError`
    listing the differences. With ``source_table`` the schema, options and stream settings are copied from
    the source (optionally on another connection) and ``max_time_deviation`` is raised to
    ``MAX_TIME_DEVIATION`` so original cell versions can be replicated.

    :param table_name: table to create.
    :param primary_key: primary-key columns: ``PrimaryKeyColumn``, ``(name, type)`` or
        ``{"name", "type", "auto_increment"}``; types ``INTEGER``/``STRING``/``BINARY``.
    :param defined_columns: optional pre-defined columns (``DefinedColumn``, ``(name, type)`` or dict).
    :param options: ``TableOptions`` or a dict of its fields.
    :param stream: ``StreamSpec``, a dict of its fields, or True/False.
    :param reserved_throughput: ``(read, write)`` capacity units, default ``(0, 0)``.
    :param source_table: copy the schema of this table instead of giving one.
    :param source_tablestore_conn_id: connection of ``source_table`` (default: ``tablestore_conn_id``).
    :param raise_max_time_deviation: for replicas, raise ``max_time_deviation`` (default True).
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) ``{"table_name", "created", "uri"}``.
    """

    hook_class = TablestoreHook
    template_fields: Sequence[str] = tablestore_template_fields("source_tablestore_conn_id", "table_name",
                                                                "source_table")
    ui_color = "#ff8c3a"

    def __init__(
        self,
        *,
        table_name: str,
        primary_key: Sequence[PrimaryKeySpec] | None = None,
        defined_columns: Sequence[ColumnSpec] = (),
        options: TableOptions | Mapping[str, Any] | None = None,
        stream: StreamSpec | Mapping[str, Any] | bool | None = None,
        reserved_throughput: tuple[int, int] | None = None,
        source_table: str | None = None,
        source_tablestore_conn_id: str | None = None,
        raise_max_time_deviation: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.primary_key = primary_key
        self.defined_columns = defined_columns
        self.options = options
        self.stream = stream
        self.reserved_throughput = reserved_throughput
        self.source_table = source_table
        self.source_tablestore_conn_id = source_tablestore_conn_id
        self.raise_max_time_deviation = raise_max_time_deviation
        # the literal schema is checked when the DAG is parsed: a wrong type fails the import, not the run
        for key in _specs("primary_key", primary_key or ()):
            _primary_key_column(key)
        for column in _specs("defined_columns", defined_columns or ()):
            _defined_column(column)
        _options(options)
        _stream(stream)
        _throughput(reserved_throughput)
        if not isinstance(raise_max_time_deviation, bool):
            raise ValueError(f"raise_max_time_deviation must be True or False, got {raise_max_time_deviation!r}")

    @cached_property
    def source_hook(self) -> TablestoreHook:
        """The hook of ``source_table``'s connection (the operator's own hook when it is the same one)."""
        if self.source_tablestore_conn_id and self.source_tablestore_conn_id != self.tablestore_conn_id:
            return self.make_hook(self.source_tablestore_conn_id)
        return self.hook

    def _wanted_schema(self) -> TableSchema:
        if self.source_table:
            if self.primary_key:
                raise ValueError("give either primary_key or source_table, not both")
            source_hook = self.source_hook
            source = source_hook.describe_table(self.source_table)
            if source is None:
                raise ValueError(
                    f"source table {self.source_table!r} does not exist on connection "
                    f"{source_hook.tablestore_conn_id!r}"
                )
            self.log.info("Copying schema, options and stream settings of %r", self.source_table)
            return replica_schema(
                source, self.table_name, raise_max_time_deviation=self.raise_max_time_deviation
            )
        if not self.primary_key:
            raise ValueError("primary_key is required (or give source_table to copy a schema)")
        read, write = _throughput(self.reserved_throughput)
        return TableSchema(
            name=self.table_name,
            primary_key=tuple(_primary_key_column(c) for c in self.primary_key),
            defined_columns=tuple(_defined_column(c) for c in self.defined_columns),
            options=_options(self.options),
            reserved_throughput=ReservedThroughput(read, write),
            stream=_stream(self.stream),
        )

    def _check_existing(self, wanted: TableSchema) -> None:
        existing = self.hook.describe_table(self.table_name)
        if existing is None:
            raise TablestoreClientError(
                f"table {self.table_name!r} reported as existing but cannot be described")
        differences = schema_differences(existing, wanted)
        if differences:
            raise TableSchemaMismatchError(
                f"table {self.table_name!r} already exists with a different schema: " + "; ".join(differences)
                + ". Drop it, choose another name, or align the operator's schema."
            )

    @closes_hooks
    def execute(self, context: Context) -> dict[str, Any]:
        with fail_fast(TableSchemaMismatchError):
            return self._create(context)

    def _create(self, context: Context) -> dict[str, Any]:
        check_table_name("table_name", self.table_name)
        if self.source_table:
            check_table_name("source_table", self.source_table)
        wanted = self._wanted_schema()
        created = False
        if self.hook.describe_table(self.table_name) is None:
            try:
                self.hook.create_table(wanted)
                created = True
                self.log.info("Created table %r", self.table_name)
            except AlreadyExistsError:
                self.log.info("Table %r was created concurrently; checking its schema", self.table_name)
        if not created:
            self._check_existing(wanted)
            self.log.info("Table %r already exists with the wanted schema", self.table_name)
        return {"table_name": self.table_name, "created": created,
                "uri": self.hook.dataset_uri(self.table_name)}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Lineage: the source table (replicas) as input, the created table as output."""
        instance = self.hook.get_config().instance_name
        inputs = []
        if self.source_table:
            inputs.append((self.source_hook.get_config().instance_name, self.source_table))
        return table_lineage(inputs=inputs, outputs=[(instance, self.table_name)])


class TablestoreDeleteTableOperator(TablestoreBaseOperator[TablestoreHook]):
    """Delete a table; succeeds when it is already gone.

    :param table_name: table to delete.
    :param tablestore_conn_id: Airflow connection id.
    :param region: overrides the connection's region.
    :return: (XCom) True if this run deleted the table, False if it was absent.
    """

    hook_class = TablestoreHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name")
    ui_color = "#ff8c3a"

    def __init__(
        self,
        *,
        table_name: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name

    @closes_hooks
    def execute(self, context: Context) -> bool:
        with fail_fast():
            check_table_name("table_name", self.table_name)
            deleted = self.hook.delete_table(self.table_name)
        if deleted:
            self.log.info("Deleted table %r", self.table_name)
        else:
            self.log.info("Table %r does not exist: nothing to delete", self.table_name)
        return deleted

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Lineage: the deleted table as output."""
        return table_lineage(outputs=[(self.hook.get_config().instance_name, self.table_name)])
