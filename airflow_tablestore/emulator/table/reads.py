"""Row reads of the table API: GetRow, BatchGetRow and GetRange, and the shaping of the rows they return.

Reads run on a pooled reader connection (committed data only). Version selection, TTL, ``columns_to_get``,
filters and column ranges are applied by :func:`shape`; GetRange pages by rows scanned, rows returned and
response bytes (``table-api-proto.md`` §5).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.api_common import (
    MAX_BATCH_GET,
    MAX_RANGE_BYTES,
    cu,
    parse,
    set_consumed,
    table_or_error,
)
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row_body
from airflow_tablestore.emulator.codec.format import HEADER
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.keys import decode_key, encode_key
from airflow_tablestore.emulator.store.model import (
    USABLE_SQL,
    Columns,
    TableInfo,
    load_columns,
    usable_params,
    visible_columns,
)
from airflow_tablestore.emulator.table.checks import ReadSpec, check_pk, decode_one, read_spec
from airflow_tablestore.emulator.table.filters import Pagination, evaluate, paginate
from airflow_tablestore.emulator.wire import field_tag, length_delimited
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs
_ROWS = field_tag(pb.GetRangeResponse, "rows")


def shape(info: TableInfo, pk: list[tuple[str, Any]], raw: Columns, spec: ReadSpec,
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
    return encode_row_body(pk, cells)


def _plain(spec: ReadSpec) -> bool:
    """A read of the newest ``spec.max_versions`` versions of every column: no column list, filter, column
    range or time range (what :func:`shape` then returns is the row's visible versions, trimmed)."""
    return (spec.max_versions is not None and spec.columns is None and spec.filter is None
            and spec.start_column is None and spec.end_column is None and spec.specific_time is None
            and spec.start_time is None)


def _get_pk(info: TableInfo, data: bytes) -> list[tuple[str, Any]]:
    row = decode_one(data)
    check_pk(info, row.pk, mode="read")
    return row.pk


class RowReads:
    """Handlers of GetRow, BatchGetRow and GetRange over a :class:`Store`."""

    def __init__(self, store: Store, clock: Clock, config: EmulatorConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config

    def get_row(self, body: bytes) -> Message:
        req = parse(pb.GetRowRequest, body)
        info = table_or_error(self.store, req.table_name)
        pk = _get_pk(info, req.primary_key)
        spec = read_spec(req)
        resp = pb.GetRowResponse()
        with self.store.db.reader() as conn:
            found = conn.execute("SELECT data FROM rows WHERE tid=? AND key=?",
                                 (info.table_id, encode_key([v for _, v in pk]))).fetchall()
        body_out = None
        if found:
            body_out = shape(info, pk, load_columns(found[0][0]), spec, self.clock.now_ms())
        resp.row = HEADER + body_out if body_out else b""
        set_consumed(resp.consumed, cu(len(resp.row)), 0)
        return resp

    def batch_get_row(self, body: bytes) -> Message:
        req = parse(pb.BatchGetRowRequest, body)
        if not req.tables:
            raise parameter_invalid("No row specified in the request of BatchGetRow.")
        total = sum(len(t.primary_key) for t in req.tables)
        if total > MAX_BATCH_GET:
            raise parameter_invalid(f"Rows count exceeds the upper limit:{MAX_BATCH_GET}")
        plan = []
        for t in req.tables:
            info = table_or_error(self.store, t.table_name)
            plan.append((t, info, read_spec(t)))
        resp = pb.BatchGetRowResponse()
        now_ms = self.clock.now_ms()
        with self.store.db.reader() as conn:
            for t, info, spec in plan:
                out = resp.tables.add(table_name=t.table_name)
                for data in t.primary_key:
                    r = out.rows.add()
                    try:
                        pk = _get_pk(info, data)
                        found = conn.execute("SELECT data FROM rows WHERE tid=? AND key=?",
                                             (info.table_id, encode_key([v for _, v in pk]))).fetchall()
                        row_body = None if not found else shape(
                            info, pk, load_columns(found[0][0]), spec, now_ms)
                    except EmulatorError as e:
                        r.is_ok = False
                        r.error.code = e.code
                        r.error.message = e.message
                        continue
                    r.is_ok = True
                    r.row = HEADER + row_body if row_body else b""
                    set_consumed(r.consumed, cu(len(r.row)), 0)
        return resp

    def get_range(self, body: bytes) -> Message | bytes:
        req = parse(pb.GetRangeRequest, body)
        info = table_or_error(self.store, req.table_name)
        start = decode_one(req.inclusive_start_primary_key)
        end = decode_one(req.exclusive_end_primary_key)
        check_pk(info, start.pk, mode="range")
        check_pk(info, end.pk, mode="range")
        spec = read_spec(req)
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
        now_ms = self.clock.now_ms()
        names, types = info.pk_names, info.pk_types
        ttl = info.time_to_live
        # Every visible version up to this many, no other shaping: a row's stored encoding is the answer
        # whenever nothing is hidden from it (USABLE_SQL decides, so such rows cost no Python call).
        plain_versions = -1  # no row has fewer versions: never
        if _plain(spec) and spec.max_versions is not None:
            plain_versions = min(spec.max_versions, info.max_versions)
        resp = pb.GetRangeResponse()
        if forward and plain_versions >= 0:
            run = self.store.read_cache.table(info.table_id)
            if run is not None and run.usable(ttl, plain_versions, now_ms):
                i, stop = run.bounds(skey, ekey)
                n = run.taken(i, stop, min(limit, budget), MAX_RANGE_BYTES - len(HEADER))
                if n is not None:  # the page from memory: what the SQLite loop below gives, sliced
                    page = run.view(i, i + n)
                    set_consumed(resp.consumed, cu(len(HEADER) + len(page)), 0)
                    tail = b""
                    if i + n < stop:
                        resume = encode_primary_key(list(zip(names, decode_key(run.keys[i + n], types), strict=True)))
                        tail = pb.GetRangeResponse(next_start_primary_key=resume).SerializePartialToString()
                    # consumed, rows, next start: the canonical field order, the page's bytes copied once
                    field = length_delimited(_ROWS, HEADER, page) if n else length_delimited(_ROWS)
                    return b"".join([resp.SerializePartialToString(), *field, tail])
        usable = usable_params(ttl, plain_versions, now_ms)
        cols = f"key, CASE WHEN {USABLE_SQL} THEN rec END, CASE WHEN {USABLE_SQL} THEN NULL ELSE data END"
        if forward:
            sql = f"SELECT {cols} FROM rows WHERE tid=? AND key>=? AND key<? ORDER BY key LIMIT ?"
        else:
            sql = f"SELECT {cols} FROM rows WHERE tid=? AND key<=? AND key>? ORDER BY key DESC LIMIT ?"
        out = bytearray(HEADER)
        returned = scanned = 0
        next_key: bytes | None = None
        chunk = min(budget, limit) + 1  # first chunk covers the common case incl. the look-ahead row
        with self.store.db.reader() as conn:
            cur = conn.execute(sql, (*usable, *usable, info.table_id, skey, ekey, budget + 1))
            try:
                while next_key is None:
                    rows = cur.fetchmany(chunk)
                    if not rows:
                        break
                    chunk = 1000
                    # The leading rows the page takes whole, joined at once when all have a usable encoding.
                    first = 0
                    take = min(len(rows), budget - scanned, limit - returned)
                    recs = [row[1] for row in rows[:take]]
                    if None not in recs:
                        size = sum(map(len, recs))
                        if len(out) + size < MAX_RANGE_BYTES:
                            out += b"".join(recs)
                            scanned += take
                            returned += take
                            first = take
                    for key, rec, data in rows[first:] if first else rows:
                        if scanned >= budget or returned >= limit or len(out) >= MAX_RANGE_BYTES:
                            next_key = key
                            break
                        scanned += 1
                        if rec is not None:
                            out += rec
                            returned += 1
                            continue
                        pk = list(zip(names, decode_key(key, types), strict=True))
                        row_body = shape(info, pk, load_columns(data), spec, now_ms)
                        if row_body is not None:
                            out += row_body
                            returned += 1
            finally:
                cur.close()
        if forward and plain_versions >= 0:
            self.store.read_cache.served(("rows", info.table_id), info.table_id, returned)
        resp.rows = bytes(out) if returned else b""
        if next_key is not None:
            resp.next_start_primary_key = encode_primary_key(
                list(zip(names, decode_key(next_key, types), strict=True)))
        set_consumed(resp.consumed, cu(len(out)), 0)
        return resp
