"""Handlers of the Tablestore table API (``POST /<ApiName>``): single-row and batch ops, GetRange (+ DDL).

Each handler takes the raw request body and returns the response message or raises :class:`EmulatorError`.
Semantics follow ``table-api-proto.md`` §3 and §5 (validation messages, conditions, versions, TTL, paging).

Size (~600 lines): one handler per table-API operation, sharing validation helpers; a split into
row, batch and range modules is planned in issue 13 (structure), after the behaviour issues land.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator import codec
from airflow_tablestore.emulator.api_common import (
    INT64_MAX,
    MAX_BATCH_GET,
    MAX_BATCH_WRITE,
    MAX_COLUMNS_PER_WRITE,
    MAX_COLUMNS_TO_GET,
    MAX_PK_LEN,
    MAX_RANGE_BYTES,
    MAX_ROW_WRITE,
    MAX_VALUE_LEN,
    Handler,
    check_name,
    cu,
    invalid_pk,
    parse,
    set_consumed,
    table_or_error,
    type_name,
)
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec import AUTO_INCREMENT, Cell, PBRow, Special
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.ddl import DdlApi
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.filters import (
    Node,
    Pagination,
    check_condition,
    condition_failed,
    evaluate,
    paginate,
    parse_filter,
)
from airflow_tablestore.emulator.keys import decode_key, encode_key
from airflow_tablestore.emulator.storage import (
    ACTION_DELETE,
    ACTION_PUT,
    ACTION_UPDATE,
    Columns,
    Store,
    TableInfo,
    WriteTxn,
    load_columns,
    visible_columns,
)
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs

log = logging.getLogger(__name__)

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


class TableApi:
    """The table API on top of a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config

    def handlers(self) -> dict[str, Handler]:
        """Every table API handler (DDL from :class:`DdlApi` plus the row operations), keyed by path."""
        names = ["GetRow", "PutRow", "UpdateRow", "DeleteRow", "BatchGetRow", "BatchWriteRow", "GetRange"]
        return {**DdlApi(self.store, self.clock).handlers(), **{"/" + n: getattr(self, "_" + n) for n in names}}

    # ------------------------------------------------------------------------------------------- helpers
    def _table(self, name: str) -> TableInfo:
        return table_or_error(self.store, name)

    def _check_pk(self, info: TableInfo, pk: list[tuple[str, Any]], *, mode: str) -> None:
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
                    raise parameter_invalid(f"INF_MIN and INF_MAX can only be used in range bounds, column: '{name}'.")
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

    @staticmethod
    def _decode_one(data: bytes) -> PBRow:
        return codec.decode_row(data)

    def _read_spec(self, req: Any, *, filter_field: str = "filter") -> ReadSpec:
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
            raise parameter_invalid(f"Invalid max versions: {max_versions}. Reason: Max versions must be positive.")
        node = parse_filter(getattr(req, filter_field)) if req.HasField(filter_field) else None
        return ReadSpec(
            columns, start, end, specific, max_versions, node,
            req.start_column if req.HasField("start_column") else None,
            req.end_column if req.HasField("end_column") else None,
        )

    def _shape(self, info: TableInfo, pk: list[tuple[str, Any]], raw: Columns, spec: ReadSpec,
               now_ms: int) -> bytes | None:
        """The row body (no header) a read returns, or None when the row is absent/filtered out."""
        pk_only = not raw
        cols = visible_columns(raw, info.time_to_live, info.max_versions, now_ms)
        if not cols and not pk_only:
            return None
        if spec.specific_time is not None or spec.start_time is not None or spec.max_versions is not None:
            selected: Columns = {}
            for name, versions in cols.items():
                vs = versions
                if spec.specific_time is not None:
                    vs = [v for v in vs if v[0] == spec.specific_time]
                elif spec.start_time is not None:
                    vs = [v for v in vs if spec.start_time <= v[0] < spec.end_time]  # type: ignore[operator]
                if spec.max_versions is not None:
                    vs = vs[: spec.max_versions]
                if vs:
                    selected[name] = vs
            cols = selected
        pk_names = {n for n, _ in pk}
        if spec.columns is not None:
            wanted = set(spec.columns)
            cols = {n: v for n, v in cols.items() if n in wanted}
            if not cols and not (wanted & pk_names):
                return None
        if (spec.filter is not None and not isinstance(spec.filter, Pagination)
                and not evaluate(spec.filter, dict(pk), cols)):
            return None
        if spec.start_column is not None or spec.end_column is not None:
            cols = {
                n: v for n, v in cols.items()
                if (spec.start_column is None or n >= spec.start_column)
                and (spec.end_column is None or n < spec.end_column)
            }
        if spec.filter is not None:
            cols = paginate(spec.filter, cols)
        if not cols and not pk_only and spec.columns is None:
            return None
        cells = [(n, v, None, ts) for n in sorted(cols) for ts, v in cols[n]]
        return codec.encode_row_body(pk, cells)

    # ------------------------------------------------------------------------------------------- reads
    def _get_pk(self, info: TableInfo, data: bytes) -> list[tuple[str, Any]]:
        row = self._decode_one(data)
        self._check_pk(info, row.pk, mode="read")
        return row.pk

    def _GetRow(self, body: bytes) -> Message:
        req = parse(pb.GetRowRequest, body)
        info = self._table(req.table_name)
        pk = self._get_pk(info, req.primary_key)
        spec = self._read_spec(req)
        resp = pb.GetRowResponse()
        with self.store.reader() as conn:
            found = conn.execute("SELECT data FROM rows WHERE tid=? AND key=?",
                                 (info.table_id, encode_key([v for _, v in pk]))).fetchall()
        body_out = None
        if found:
            body_out = self._shape(info, pk, load_columns(found[0][0]), spec, self.clock.now_ms())
        resp.row = codec.HEADER + body_out if body_out else b""
        set_consumed(resp.consumed, cu(len(resp.row)), 0)
        return resp

    def _BatchGetRow(self, body: bytes) -> Message:
        req = parse(pb.BatchGetRowRequest, body)
        if not req.tables:
            raise parameter_invalid("No row specified in the request of BatchGetRow.")
        total = sum(len(t.primary_key) for t in req.tables)
        if total > MAX_BATCH_GET:
            raise parameter_invalid(f"Rows count exceeds the upper limit:{MAX_BATCH_GET}")
        plan = []
        for t in req.tables:
            info = self._table(t.table_name)
            plan.append((t, info, self._read_spec(t)))
        resp = pb.BatchGetRowResponse()
        now_ms = self.clock.now_ms()
        with self.store.reader() as conn:
            for t, info, spec in plan:
                out = resp.tables.add(table_name=t.table_name)
                for data in t.primary_key:
                    r = out.rows.add()
                    try:
                        pk = self._get_pk(info, data)
                        found = conn.execute("SELECT data FROM rows WHERE tid=? AND key=?",
                                             (info.table_id, encode_key([v for _, v in pk]))).fetchall()
                        row_body = None if not found else self._shape(
                            info, pk, load_columns(found[0][0]), spec, now_ms)
                    except EmulatorError as e:
                        r.is_ok = False
                        r.error.code = e.code
                        r.error.message = e.message
                        continue
                    r.is_ok = True
                    r.row = codec.HEADER + row_body if row_body else b""
                    set_consumed(r.consumed, cu(len(r.row)), 0)
        return resp

    def _GetRange(self, body: bytes) -> Message:
        req = parse(pb.GetRangeRequest, body)
        info = self._table(req.table_name)
        start = self._decode_one(req.inclusive_start_primary_key)
        end = self._decode_one(req.exclusive_end_primary_key)
        self._check_pk(info, start.pk, mode="range")
        self._check_pk(info, end.pk, mode="range")
        spec = self._read_spec(req)
        if req.HasField("limit") and req.limit <= 0:
            raise parameter_invalid("The limit must be greater than 0.")
        forward = req.direction == pb.FORWARD
        skey = encode_key([v for _, v in start.pk])
        ekey = encode_key([v for _, v in end.pk])
        if forward and skey >= ekey:
            raise parameter_invalid("Begin key must less than end key in FORWARD")
        if not forward and skey <= ekey:
            raise parameter_invalid("Begin key must more than end key in BACKWARD")
        budget = self.config.range_page_rows
        limit = req.limit if req.HasField("limit") else budget
        if forward:
            sql = "SELECT key, data FROM rows WHERE tid=? AND key>=? AND key<? ORDER BY key LIMIT ?"
        else:
            sql = "SELECT key, data FROM rows WHERE tid=? AND key<=? AND key>? ORDER BY key DESC LIMIT ?"
        now_ms = self.clock.now_ms()
        names, types = info.pk_names, info.pk_types
        out = bytearray(codec.HEADER)
        returned = scanned = 0
        next_key: bytes | None = None
        chunk = min(budget, limit) + 1  # first chunk covers the common case incl. the look-ahead row
        with self.store.reader() as conn:
            cur = conn.execute(sql, (info.table_id, skey, ekey, budget + 1))
            try:
                while next_key is None:
                    rows = cur.fetchmany(chunk)
                    if not rows:
                        break
                    chunk = 1000
                    for key, data in rows:
                        if scanned >= budget or returned >= limit or len(out) >= MAX_RANGE_BYTES:
                            next_key = key
                            break
                        scanned += 1
                        pk = list(zip(names, decode_key(key, types), strict=True))
                        row_body = self._shape(info, pk, load_columns(data), spec, now_ms)
                        if row_body is not None:
                            out += row_body
                            returned += 1
            finally:
                cur.close()
        resp = pb.GetRangeResponse()
        resp.rows = bytes(out) if returned else b""
        if next_key is not None:
            resp.next_start_primary_key = codec.encode_pk(list(zip(names, decode_key(next_key, types), strict=True)))
        set_consumed(resp.consumed, cu(len(out)), 0)
        return resp

    # ------------------------------------------------------------------------------------------- writes
    def _prepare(self, info: TableInfo, kind: int, data: bytes, condition: Any, return_content: Any,
                 now_s: float) -> WriteOp:
        """Decode and validate one row write (everything that does not depend on the stored row)."""
        row = self._decode_one(data)
        mode = "delete" if kind == pb.DELETE else "write"
        self._check_pk(info, row.pk, mode=mode)
        pk_names = set(info.pk_names)
        if kind == pb.DELETE:
            if row.cells:
                raise parameter_invalid("Invalid delete row request: unexpected cells in request.")
            if not row.delete_marker:
                raise parameter_invalid("Invalid request of delete row: missing RowDeleteMarker in request.")
        else:
            if row.delete_marker:
                raise parameter_invalid("Invalid request of put/update row: unexpected RowDeleteMarker in request.")
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
        dev = info.deviation_s
        ttl = info.time_to_live
        now_i = int(now_s)
        for c in row.cells:
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
                if c.op not in (None, codec.OP_DELETE_ALL, codec.OP_DELETE_ONE, codec.OP_INCREMENT):
                    raise parameter_invalid(f"Invalid op type of cell: {c.op}.")
                if c.op in (codec.OP_DELETE_ALL, codec.OP_DELETE_ONE) and c.value is not None:
                    raise parameter_invalid(
                        "Column value cannot be given when type is DELETE_ONE_VERSION,DELETE_ALL_VERSION.")
                if c.op == codec.OP_DELETE_ONE and c.ts is None:
                    raise parameter_invalid("Timestamp must be given when type is DELETE_ONE_VERSION.")
                if c.op == codec.OP_DELETE_ALL and c.ts is not None:
                    raise parameter_invalid("Timestamp cannot be given when type is DELETE_ALL_VERSION.")
                if c.op is None and c.value is None:
                    raise parameter_invalid("Invalid request of update row: find PUT cells without values.")
                if c.op == codec.OP_INCREMENT and (type_name(c.value) != "INTEGER"):
                    raise parameter_invalid(f"Increment value of column '{c.name}' must be INTEGER.")
            if isinstance(c.value, float) and not math.isfinite(c.value):
                raise parameter_invalid(
                    "NaN can't be set to double value." if math.isnan(c.value) else "Infinity can't be set to double value.")
            vlen = 8
            if isinstance(c.value, str | bytes):
                vlen = len(c.value.encode("utf-8")) if isinstance(c.value, str) else len(c.value)
                if vlen > MAX_VALUE_LEN:
                    raise parameter_invalid(
                        f"The length of attribute column: '{c.name}' exceeded the MaxLength:{MAX_VALUE_LEN} "
                        f"with Current Length:{vlen}."
                    )
            size += len(c.name) + vlen
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
            raise parameter_invalid(f"Invalid expect:{pb.RowExistenceExpectation.Name(rex)} when modify row with pk auto increment.")
        node = parse_filter(condition.column_condition, for_condition=True) \
            if condition.HasField("column_condition") and condition.column_condition else None
        rtype = return_content.return_type if return_content is not None and \
            return_content.HasField("return_type") else pb.RT_NONE
        after = tuple(dict.fromkeys(return_content.return_column_names)) if rtype == pb.RT_AFTER_MODIFY else None
        return WriteOp(kind, row.pk, row.cells, rex, node, rtype in (pb.RT_PK, pb.RT_AFTER_MODIFY), size, after)

    def _apply(self, txn: WriteTxn, info: TableInfo, op: WriteOp, now_ms: int) -> bytes | None:
        """Apply one prepared write inside ``txn``; returns the RT_PK row or None. Raises before mutating."""
        pk = op.pk
        if any(v is AUTO_INCREMENT for _, v in pk):
            pk = [(n, txn.next_auto_increment(info.table_id) if v is AUTO_INCREMENT else v) for n, v in pk]
        key = encode_key([v for _, v in pk])
        old = txn.get(info.table_id, key)
        old_visible = visible_columns(old, info.time_to_live, info.max_versions, now_ms) if old is not None else {}
        exists = old is not None and (not old or bool(old_visible))
        if (op.row_existence == 1 and not exists) or (op.row_existence == 2 and exists):
            raise condition_failed()
        check_condition(op.column_condition, dict(pk), old_visible)
        tid = info.table_id
        if op.kind == pb.PUT:
            cols: Columns = {}
            logged: list[codec.CellSpec] = []
            for c in op.cells:
                ts = c.ts if c.ts is not None else now_ms
                versions = [v for v in cols.get(c.name, []) if v[0] != ts]
                versions.append((ts, c.value))
                versions.sort(key=lambda v: -v[0])
                cols[c.name] = versions[: info.max_versions]
                logged.append((c.name, c.value, None, ts))
            txn.put(tid, key, cols)
            txn.log(info, ACTION_PUT, pk, logged)
        elif op.kind == pb.UPDATE:
            cols = {n: list(v) for n, v in (old or {}).items()} if exists else {}
            logged = []
            only_deletes = True
            for c in op.cells:
                if c.op is None or c.op == codec.OP_INCREMENT:
                    only_deletes = False
                    if c.op == codec.OP_INCREMENT:
                        current = (visible_columns({c.name: cols.get(c.name, [])}, info.time_to_live,
                                                   info.max_versions, now_ms).get(c.name) or [(0, 0)])[0][1]
                        if type_name(current) != "INTEGER":
                            raise parameter_invalid(f"Column '{c.name}' to increment is not an INTEGER.")
                        value, ts = current + c.value, now_ms
                        if not -(2**63) <= value < 2**63:
                            raise parameter_invalid(f"Column '{c.name}' increment overflows int64.")
                    else:
                        value, ts = c.value, c.ts if c.ts is not None else now_ms
                    versions = [v for v in cols.get(c.name, []) if v[0] != ts]
                    versions.append((ts, value))
                    versions.sort(key=lambda v: -v[0])
                    cols[c.name] = versions[: info.max_versions]
                    logged.append((c.name, value, None, ts))
                elif c.op == codec.OP_DELETE_ONE:
                    if c.name in cols:
                        cols[c.name] = [v for v in cols[c.name] if v[0] != c.ts]
                        if not cols[c.name]:
                            del cols[c.name]
                    logged.append((c.name, None, codec.OP_DELETE_ONE, c.ts))
                else:
                    cols.pop(c.name, None)
                    logged.append((c.name, None, codec.OP_DELETE_ALL, None))
            if not exists and only_deletes:
                return codec.encode_pk(pk) if op.return_pk else None
            if cols:
                txn.put(tid, key, cols)
            elif old is not None:
                txn.delete(tid, key)
            txn.log(info, ACTION_UPDATE, pk, logged)
        else:
            if old is not None:
                txn.delete(tid, key)
                if exists:
                    txn.log(info, ACTION_DELETE, pk, [])
        if op.return_columns is not None and op.kind != pb.DELETE:  # newest version of each asked column
            return codec.encode_row(pk, [(n, cols[n][0][1], None, cols[n][0][0])
                                         for n in sorted(op.return_columns) if n in cols])
        return codec.encode_pk(pk) if op.return_pk else None

    def _single_write(self, body: bytes, cls: type[Message], kind: int, field: str,
                      resp_cls: type[Message]) -> Message:
        req = parse(cls, body)
        info = self._table(req.table_name)
        op = self._prepare(info, kind, getattr(req, field), req.condition,
                           req.return_content if req.HasField("return_content") else None, self.clock.now_s())
        with self.store.write() as txn:
            info = self._table(req.table_name)
            row = self._apply(txn, info, op, self.clock.now_ms())
        resp = resp_cls()
        set_consumed(resp.consumed, 0, cu(op.size))  # type: ignore[attr-defined]
        if row is not None:
            resp.row = row  # type: ignore[attr-defined]
        return resp

    def _PutRow(self, body: bytes) -> Message:
        return self._single_write(body, pb.PutRowRequest, pb.PUT, "row", pb.PutRowResponse)

    def _UpdateRow(self, body: bytes) -> Message:
        return self._single_write(body, pb.UpdateRowRequest, pb.UPDATE, "row_change", pb.UpdateRowResponse)

    def _DeleteRow(self, body: bytes) -> Message:
        return self._single_write(body, pb.DeleteRowRequest, pb.DELETE, "primary_key", pb.DeleteRowResponse)

    def _BatchWriteRow(self, body: bytes) -> Message:
        req = parse(pb.BatchWriteRowRequest, body)
        if not req.tables:
            raise parameter_invalid("No row is specified in BatchWriteRow.")
        total = 0
        size = 0
        for t in req.tables:
            if not t.rows:
                raise parameter_invalid(f"No operation is specified for table: '{t.table_name}'.")
            total += len(t.rows)
            size += sum(len(r.row_change) for r in t.rows)
        if total > MAX_BATCH_WRITE:
            raise parameter_invalid(f"Rows count exceeds the upper limit:{MAX_BATCH_WRITE}")
        if size > MAX_ROW_WRITE:
            raise parameter_invalid(
                f"The total data size of BatchWriteRow request exceeds the limit, limit size: {MAX_ROW_WRITE}, "
                f"data size: {size}."
            )
        now_s = self.clock.now_s()
        plans: list[tuple[str, list[WriteOp | EmulatorError]]] = []
        for t in req.tables:
            info = self._table(t.table_name)
            ops: list[WriteOp | EmulatorError] = []
            by_key: dict[bytes, list[WriteOp]] = {}
            for r in t.rows:
                try:
                    op = self._prepare(info, r.type, r.row_change, r.condition,
                                       r.return_content if r.HasField("return_content") else None, now_s)
                except EmulatorError as e:
                    ops.append(e)
                    continue
                if all(v is not AUTO_INCREMENT for _, v in op.pk):
                    by_key.setdefault(encode_key([v for _, v in op.pk]), []).append(op)
                ops.append(op)
            for same in by_key.values():
                if len(same) > 1:
                    if any(o.row_existence != 0 for o in same):
                        raise parameter_invalid(
                            "Repeated rows do not support row exist expectation check in BatchModify.")
                    if any(o.column_condition is not None for o in same):
                        raise parameter_invalid("Repeated rows do not support row condition check in BatchModify.")
            plans.append((t.table_name, ops))
        resp = pb.BatchWriteRowResponse()
        with self.store.write() as txn:
            now_ms = self.clock.now_ms()
            for name, ops in plans:
                info = self._table(name)
                out = resp.tables.add(table_name=name)
                for item in ops:
                    r = out.rows.add()
                    if isinstance(item, EmulatorError):
                        r.is_ok = False
                        r.error.code, r.error.message = item.code, item.message
                        continue
                    try:
                        row = self._apply(txn, info, item, now_ms)
                    except EmulatorError as e:
                        r.is_ok = False
                        r.error.code, r.error.message = e.code, e.message
                        continue
                    r.is_ok = True
                    set_consumed(r.consumed, 0, cu(item.size))
                    if row is not None:
                        r.row = row
        return resp


__all__ = ["ReadSpec", "TableApi", "WriteOp", "parse", "set_consumed"]
