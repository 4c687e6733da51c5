"""Row writes of the table API: PutRow, UpdateRow, DeleteRow and BatchWriteRow, applied under the write lock.

Requests are validated first (:func:`~.checks.prepare_write`, nothing written on a validation error),
then applied in one store transaction; each applied write appends its stream record in that transaction.
Conditions are evaluated against the row as it was before the write (``table-api-proto.md`` §3 and §5).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.api_common import (
    MAX_BATCH_WRITE,
    MAX_ROW_WRITE,
    cu,
    parse,
    set_consumed,
    table_or_error,
    type_name,
)
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import (
    AUTO_INCREMENT,
    OP_DELETE_ALL,
    OP_DELETE_ONE,
    OP_INCREMENT,
    CellSpec,
)
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.store.core import WriteTxn
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.keys import encode_key
from airflow_tablestore.emulator.store.model import (
    ACTION_DELETE,
    ACTION_PUT,
    ACTION_UPDATE,
    Columns,
    TableInfo,
    visible_columns,
)
from airflow_tablestore.emulator.store.stream_log import StreamLog
from airflow_tablestore.emulator.table.checks import WriteOp, prepare_write
from airflow_tablestore.emulator.table.filters import check_condition, condition_failed
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs


def apply_write(txn: WriteTxn, stream: StreamLog, info: TableInfo, op: WriteOp,
                now_ms: int) -> bytes | None:
    """Apply one prepared write inside ``txn`` (its stream record to ``stream``, in the same ``txn``); returns
    the RT_PK row or None. Raises before mutating."""
    pk = op.pk
    if any(v is AUTO_INCREMENT for _, v in pk):
        pk = [(n, txn.next_auto_increment(info.table_id) if v is AUTO_INCREMENT else v) for n, v in pk]
    key = encode_key([v for _, v in pk])
    old = txn.get(info.table_id, key)
    old_visible = (visible_columns(old, info.time_to_live, info.max_versions, now_ms)
                   if old is not None else {})
    exists = old is not None and (not old or bool(old_visible))
    if (op.row_existence == 1 and not exists) or (op.row_existence == 2 and exists):
        raise condition_failed()
    check_condition(op.column_condition, dict(pk), old_visible)
    tid = info.table_id
    if op.kind == pb.PUT:
        cols: Columns = {}
        logged: list[CellSpec] = []
        for c in op.cells:
            ts = c.ts if c.ts is not None else now_ms
            versions = [v for v in cols.get(c.name, []) if v[0] != ts]
            versions.append((ts, c.value))
            versions.sort(key=lambda v: -v[0])
            cols[c.name] = versions[: info.max_versions]
            logged.append((c.name, c.value, None, ts))
        txn.put(tid, key, cols, pk)
        stream.append(txn, info, ACTION_PUT, pk, logged)
    elif op.kind == pb.UPDATE:
        cols = {n: list(v) for n, v in (old or {}).items()} if exists else {}
        logged = []
        only_deletes = True
        for c in op.cells:
            if c.op is None or c.op == OP_INCREMENT:
                only_deletes = False
                if c.op == OP_INCREMENT:
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
            elif c.op == OP_DELETE_ONE:
                if c.name in cols:
                    cols[c.name] = [v for v in cols[c.name] if v[0] != c.ts]
                    if not cols[c.name]:
                        del cols[c.name]
                logged.append((c.name, None, OP_DELETE_ONE, c.ts))
            else:
                cols.pop(c.name, None)
                logged.append((c.name, None, OP_DELETE_ALL, None))
        if not exists and only_deletes:
            return encode_primary_key(pk) if op.return_pk else None
        if cols:
            txn.put(tid, key, cols, pk)
        elif old is not None:
            txn.delete(tid, key)
        stream.append(txn, info, ACTION_UPDATE, pk, logged)
    else:
        if old is not None:
            txn.delete(tid, key)
            if exists:
                stream.append(txn, info, ACTION_DELETE, pk, [])
    if op.return_columns is not None and op.kind != pb.DELETE:  # newest version of each asked column
        return encode_row(pk, [(n, cols[n][0][1], None, cols[n][0][0])
                                     for n in sorted(op.return_columns) if n in cols])
    return encode_primary_key(pk) if op.return_pk else None


class RowWrites:
    """Handlers of PutRow, UpdateRow, DeleteRow and BatchWriteRow over a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def _single_write(self, body: bytes, cls: type[Message], kind: int, field: str,
                      resp_cls: type[Message]) -> Message:
        req = parse(cls, body)
        info = table_or_error(self.store, req.table_name)
        op = prepare_write(info, kind, getattr(req, field), req.condition,
                           req.return_content if req.HasField("return_content") else None, self.clock.now_s())
        with self.store.db.write() as txn:
            info = table_or_error(self.store, req.table_name)
            row = apply_write(txn, self.store.stream, info, op, self.clock.now_ms())
        resp = resp_cls()
        set_consumed(resp.consumed, 0, cu(op.size))  # type: ignore[attr-defined]
        if row is not None:
            resp.row = row  # type: ignore[attr-defined]
        return resp

    def put_row(self, body: bytes) -> Message:
        return self._single_write(body, pb.PutRowRequest, pb.PUT, "row", pb.PutRowResponse)

    def update_row(self, body: bytes) -> Message:
        return self._single_write(body, pb.UpdateRowRequest, pb.UPDATE, "row_change", pb.UpdateRowResponse)

    def delete_row(self, body: bytes) -> Message:
        return self._single_write(body, pb.DeleteRowRequest, pb.DELETE, "primary_key", pb.DeleteRowResponse)

    def _plan_batch(self, req: Any) -> list[tuple[str, list[WriteOp | EmulatorError]]]:
        """Validate every row of a BatchWriteRow request; a row's own error becomes its result."""
        now_s = self.clock.now_s()
        plans: list[tuple[str, list[WriteOp | EmulatorError]]] = []
        for t in req.tables:
            info = table_or_error(self.store, t.table_name)
            ops: list[WriteOp | EmulatorError] = []
            by_key: dict[bytes, list[WriteOp]] = {}
            for r in t.rows:
                try:
                    op = prepare_write(info, r.type, r.row_change, r.condition,
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
                        raise parameter_invalid(
                            "Repeated rows do not support row condition check in BatchModify.")
            plans.append((t.table_name, ops))
        return plans

    def batch_write_row(self, body: bytes) -> Message:
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
                "The total data size of BatchWriteRow request exceeds the limit, "
                f"limit size: {MAX_ROW_WRITE}, "
                f"data size: {size}."
            )
        plans = self._plan_batch(req)
        resp = pb.BatchWriteRowResponse()
        with self.store.db.write() as txn:
            now_ms = self.clock.now_ms()
            for name, ops in plans:
                info = table_or_error(self.store, name)
                out = resp.tables.add(table_name=name)
                for item in ops:
                    r = out.rows.add()
                    if isinstance(item, EmulatorError):
                        r.is_ok = False
                        r.error.code, r.error.message = item.code, item.message
                        continue
                    try:
                        row = apply_write(txn, self.store.stream, info, item, now_ms)
                    except EmulatorError as e:
                        r.is_ok = False
                        r.error.code, r.error.message = e.code, e.message
                        continue
                    r.is_ok = True
                    set_consumed(r.consumed, 0, cu(item.size))
                    if row is not None:
                        r.row = row
        return resp
