"""Validation shared by the table API's row handlers: primary keys, read specs and row writes.

Turns request fields into checked plans — :class:`ReadSpec` for reads (:mod:`.reads`) and
:class:`WriteOp` for writes (:mod:`.writes`) — or raises :class:`EmulatorError` with the service's
messages (``table-api-proto.md`` §3 and §5). Nothing here touches the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.emulator.api_common import (
    INT64_MAX,
    MAX_COLUMNS_PER_WRITE,
    MAX_COLUMNS_TO_GET,
    MAX_PK_LEN,
    MAX_ROW_WRITE,
    MAX_VALUE_LEN,
    check_name,
    invalid_pk,
    type_name,
)
from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.format import (
    AUTO_INCREMENT,
    OP_DELETE_ALL,
    OP_DELETE_ONE,
    OP_INCREMENT,
    Cell,
    PBRow,
    Special,
)
from airflow_tablestore.emulator.errors import parameter_invalid
from airflow_tablestore.emulator.store.model import TableInfo
from airflow_tablestore.emulator.table.filters import Node, parse_filter
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs


@dataclass
class ReadSpec:
    """Version selection and shaping of a read (GetRow, BatchGetRow table entry, GetRange)."""

    columns: list[str] | None
    start_time: int | None
    end_time: int | None
    specific_time: int | None
    max_versions: int | None
    filter: Node | None
    start_column: str | None
    end_column: str | None


@dataclass
class WriteOp:
    """A validated row write ready to apply under the write lock."""

    kind: int  # pb.PUT / pb.UPDATE / pb.DELETE
    pk: list[tuple[str, Any]]
    cells: list[Cell]
    row_existence: int
    column_condition: Node | None
    return_pk: bool
    size: int
    return_columns: tuple[str, ...] | None = None  # RT_AFTER_MODIFY: PK + these columns after the write


def decode_one(data: bytes) -> PBRow:
    return decode_row(data)


def check_pk(info: TableInfo, pk: list[tuple[str, Any]], *, mode: str) -> None:
    """Validate a key against the schema. ``mode``: read, write (auto-increment allowed), delete, range."""
    schema = info.pk
    if len(pk) != len(schema):
        raise invalid_pk(f"Validate PK size fail. Input: {len(pk)}, Meta: {len(schema)}.")
    for (name, value), (sname, stype) in zip(pk, schema, strict=True):
        if name != sname:
            raise invalid_pk(f"Validate PK name fail. Input: {name}, Meta: {sname}.")
        if isinstance(value, Special):
            if value is AUTO_INCREMENT:
                if mode == "read" or mode == "range":
                    raise parameter_invalid("PKAutoIncr can't be used for read operations.")
                if mode == "delete":
                    raise parameter_invalid("Invalid row to delete which with pk auto increment.")
                if info.auto_increment != name:
                    raise invalid_pk(f"Validate PK type fail. Input: AUTO_INCREMENT, Meta: {stype}.")
                continue
            if mode != "range":
                raise parameter_invalid(
                    f"INF_MIN and INF_MAX can only be used in range bounds, column: '{name}'.")
            continue
        t = type_name(value)
        if t != stype:
            raise invalid_pk(f"Validate PK type fail. Input: {t}, Meta: {stype}.")
        if isinstance(value, str | bytes):
            n = len(value.encode("utf-8")) if isinstance(value, str) else len(value)
            if n > MAX_PK_LEN:
                raise parameter_invalid(
                    f"The length of primary key column: '{name}' exceeds the MaxLength: {MAX_PK_LEN} "
                    f"with CurrentLength: {n}."
                )


def read_spec(req: Any, *, filter_field: str = "filter") -> ReadSpec:
    """The version selection, columns and filter of a read request."""
    columns = list(req.columns_to_get) or None
    if columns and len(columns) > MAX_COLUMNS_TO_GET:
        raise parameter_invalid(
            f"The number of columns from the request exceeds the limit, limit count: {MAX_COLUMNS_TO_GET}, "
            f"column count: {len(columns)}."
        )
    start = end = specific = None
    if req.HasField("time_range"):
        tr = req.time_range
        if tr.HasField("specific_time"):
            specific = tr.specific_time
            if specific < 0:
                raise parameter_invalid("Specific timestamp cannot be less than 0.")
        elif tr.HasField("start_time") and tr.HasField("end_time"):
            start, end = tr.start_time, tr.end_time
            if start < 0 or end <= start:
                raise parameter_invalid(f"Invalid time range: [{start}, {end}).")
        elif tr.HasField("start_time") or tr.HasField("end_time"):
            raise parameter_invalid("Start and end time must be given at the same time.")
    max_versions = req.max_versions if req.HasField("max_versions") else None
    if max_versions is None and not req.HasField("time_range"):
        raise parameter_invalid("No version condition is specified while querying row.")
    if max_versions is not None and max_versions <= 0:
        raise parameter_invalid(
            f"Invalid max versions: {max_versions}. Reason: Max versions must be positive.")
    node = parse_filter(getattr(req, filter_field)) if req.HasField(filter_field) else None
    return ReadSpec(
        columns, start, end, specific, max_versions, node,
        req.start_column if req.HasField("start_column") else None,
        req.end_column if req.HasField("end_column") else None,
    )


def _check_cell(c: Cell, kind: int, pk_names: set[str]) -> None:
    """Name, op type and value rules of one written cell."""
    check_name(c.name)
    if c.name in pk_names:
        raise parameter_invalid(f"Duplicated attribute column name with primary key column: '{c.name}'.")
    if isinstance(c.value, Special):
        raise parameter_invalid(f"Invalid value type for attribute column: '{c.name}'.")
    if kind == pb.PUT:
        if c.op is not None:
            raise parameter_invalid(f"OpType cannot be given for column name:{c.name} in PutRow.")
        if c.value is None:
            raise parameter_invalid("Invalid request of put row: find cells without values.")
    else:
        if c.op not in (None, OP_DELETE_ALL, OP_DELETE_ONE, OP_INCREMENT):
            raise parameter_invalid(f"Invalid op type of cell: {c.op}.")
        if c.op in (OP_DELETE_ALL, OP_DELETE_ONE) and c.value is not None:
            raise parameter_invalid(
                "Column value cannot be given when type is DELETE_ONE_VERSION,DELETE_ALL_VERSION.")
        if c.op == OP_DELETE_ONE and c.ts is None:
            raise parameter_invalid("Timestamp must be given when type is DELETE_ONE_VERSION.")
        if c.op == OP_DELETE_ALL and c.ts is not None:
            raise parameter_invalid("Timestamp cannot be given when type is DELETE_ALL_VERSION.")
        if c.op is None and c.value is None:
            raise parameter_invalid("Invalid request of update row: find PUT cells without values.")
        if c.op == OP_INCREMENT and (type_name(c.value) != "INTEGER"):
            raise parameter_invalid(f"Increment value of column '{c.name}' must be INTEGER.")
    if isinstance(c.value, float) and not math.isfinite(c.value):
        raise parameter_invalid(
            "NaN can't be set to double value." if math.isnan(c.value)
            else "Infinity can't be set to double value.")


def _check_cell_size_and_time(c: Cell, info: TableInfo, now_i: int) -> int:
    """Length limit and timestamp window of one written cell; returns its size (name + value)."""
    dev = info.deviation_s
    ttl = info.time_to_live
    vlen = 8
    if isinstance(c.value, str | bytes):
        vlen = len(c.value.encode("utf-8")) if isinstance(c.value, str) else len(c.value)
        if vlen > MAX_VALUE_LEN:
            raise parameter_invalid(
                f"The length of attribute column: '{c.name}' exceeded the MaxLength:{MAX_VALUE_LEN} "
                f"with Current Length:{vlen}."
            )
    if c.ts is not None:
        if not 0 <= c.ts < INT64_MAX // 1000:
            raise parameter_invalid("Timestamp must be in range [0, INT64_MAX/1000).")
        if c.value is not None and c.op is None:
            ts_s = c.ts // 1000
            low = now_i - dev
            if ttl != -1:
                low = max(low, now_i - ttl)
            if not low <= ts_s < now_i + dev:
                raise parameter_invalid(
                    f"Invalid timestamp. Cell:{c.name}. Version {c.ts} ms is outside the allowed range "
                    f"(max time deviation {dev} s, time to live {ttl} s)."
                )
    return len(c.name) + vlen


def prepare_write(info: TableInfo, kind: int, data: bytes, condition: Any, return_content: Any,
                  now_s: float) -> WriteOp:
    """Decode and validate one row write (everything that does not depend on the stored row)."""
    row = decode_one(data)
    mode = "delete" if kind == pb.DELETE else "write"
    check_pk(info, row.pk, mode=mode)
    pk_names = set(info.pk_names)
    if kind == pb.DELETE:
        if row.cells:
            raise parameter_invalid("Invalid delete row request: unexpected cells in request.")
        if not row.delete_marker:
            raise parameter_invalid("Invalid request of delete row: missing RowDeleteMarker in request.")
    else:
        if row.delete_marker:
            raise parameter_invalid(
                "Invalid request of put/update row: unexpected RowDeleteMarker in request.")
        if kind == pb.UPDATE:
            if not info.allow_update:
                raise parameter_invalid("UpdateRow is not allowed on a table with allow_update=false.")
            if not row.cells:
                raise parameter_invalid("Invalid update row request: missing cells in request.")
    if len(row.cells) > MAX_COLUMNS_PER_WRITE:
        raise parameter_invalid(
            f"The number of attribute columns exceeds the limit, limit count:{MAX_COLUMNS_PER_WRITE}, "
            f"column count:{len(row.cells)}"
        )
    size = 0
    for name, value in row.pk:
        size += len(name) + (len(value) if isinstance(value, str | bytes) else 8)
    now_i = int(now_s)
    for c in row.cells:
        _check_cell(c, kind, pk_names)
        size += _check_cell_size_and_time(c, info, now_i)
    if size > MAX_ROW_WRITE:
        raise parameter_invalid(
            f"The total data size of PutRow request exceeds the limit, limit size: {MAX_ROW_WRITE}, "
            f"data size: {size}."
        )
    rex = condition.row_existence
    if rex not in (0, 1, 2):
        raise parameter_invalid(f"Invalid row-existence expectation: {rex}.")
    has_auto = any(v is AUTO_INCREMENT for _, v in row.pk)
    if has_auto and rex != 0:
        raise parameter_invalid(f"Invalid expect:{pb.RowExistenceExpectation.Name(rex)} "
                                "when modify row with pk auto increment.")
    node = parse_filter(condition.column_condition, for_condition=True) \
        if condition.HasField("column_condition") and condition.column_condition else None
    rtype = return_content.return_type if return_content is not None and \
        return_content.HasField("return_type") else pb.RT_NONE
    after = tuple(dict.fromkeys(return_content.return_column_names)) if rtype == pb.RT_AFTER_MODIFY else None
    return WriteOp(kind, row.pk, row.cells, rex, node, rtype in (pb.RT_PK, pb.RT_AFTER_MODIFY), size, after)
