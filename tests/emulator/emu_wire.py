"""Minimal raw-HTTP client for emulator tests: V2 signing, PlainBuffer building via the emulator codec.

Deliberately independent of ``airflow_tablestore.client`` (written concurrently); uses ``requests``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import uuid
from typing import Any

import requests
from google.protobuf.message import Message

from airflow_tablestore.emulator.codec.decode import decode_row, decode_rows
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row, value_payload
from airflow_tablestore.emulator.codec.format import PBRow
from airflow_tablestore.protocol import ots_filter_pb2, ots_table_pb2
from testing.emulator_http import v2_headers

pb: Any = ots_table_pb2
fpb: Any = ots_filter_pb2


class WireError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def verify_response(secret: str, uri: str, resp: requests.Response, akid: str) -> None:
    h = {k.lower(): v for k, v in resp.headers.items()}
    for name in ("x-ots-contentmd5", "x-ots-requestid", "x-ots-date", "x-ots-contenttype", "authorization"):
        assert name in h, f"missing response header {name}"
    assert h["x-ots-contentmd5"] == base64.b64encode(hashlib.md5(resp.content).digest()).decode()
    dt.datetime.strptime(h["x-ots-date"], "%Y-%m-%dT%H:%M:%S.%fZ")
    items = sorted((k, v.strip()) for k, v in h.items() if k.startswith("x-ots-"))
    msg = "".join(f"{k}:{v}\n" for k, v in items) + uri
    sig = base64.b64encode(hmac.new(secret.encode(), msg.encode(), hashlib.sha1).digest()).decode()
    assert h["authorization"] == f"OTS {akid}:{sig}", "bad response signature"


class Wire:
    """Signs and sends one protobuf request; parses the response or raises :class:`WireError`."""

    def __init__(self, endpoint: str, akid: str = "emulator-access-key-id",
                 secret: str = "emulator-access-key-secret", instance: str = "emulator") -> None:
        self.endpoint = endpoint
        self.akid = akid
        self.secret = secret
        self.instance = instance
        self.session = requests.Session()

    def headers(self, body: bytes, uri: str, **overrides: str) -> dict[str, str]:
        return v2_headers(self.akid, self.secret, self.instance, uri, body, dict(overrides))

    def raw(self, uri: str, body: bytes, headers: dict[str, str] | None = None) -> requests.Response:
        return self.session.post(self.endpoint + uri, data=body,
                                 headers=headers if headers is not None else self.headers(body, uri), timeout=60)

    def call(self, api: str, request: Message | bytes, response_cls: Any = None) -> Any:
        uri = "/" + api
        body = request if isinstance(request, bytes) else request.SerializeToString()
        resp = self.raw(uri, body)
        if resp.status_code != 200:
            err = pb.Error.FromString(resp.content)
            raise WireError(resp.status_code, err.code, err.message, resp.headers)
        verify_response(self.secret, uri, resp, self.akid)
        cls = response_cls or getattr(pb, api + "Response")
        return cls.FromString(resp.content)


# ---- helpers ----------------------------------------------------------------------------------------
def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def create_table(wire: Wire, name: str, pk: list[tuple[str, int]] | None = None, *, ttl: int = -1,
                 max_versions: int = 1, stream_hours: int | None = None, deviation: int | None = None,
                 auto_increment: str | None = None) -> str:
    req = pb.CreateTableRequest()
    req.table_meta.table_name = name
    for col, t in pk or [("pk", 1)]:
        p = req.table_meta.primary_key.add(name=col, type=t)
        if col == auto_increment:
            p.option = pb.AUTO_INCREMENT
    req.reserved_throughput.capacity_unit.read = 0
    req.reserved_throughput.capacity_unit.write = 0
    req.table_options.time_to_live = ttl
    req.table_options.max_versions = max_versions
    if deviation is not None:
        req.table_options.deviation_cell_version_in_sec = deviation
    if stream_hours is not None:
        req.stream_spec.enable_stream = True
        req.stream_spec.expiration_time = stream_hours
    wire.call("CreateTable", req)
    return name


def put(wire: Wire, table: str, pk: list[tuple[str, Any]], cols: dict[str, Any] | list[Any], *,
        existence: int = 0, condition: bytes | None = None, return_pk: bool = False) -> Any:
    cells = [(n, v, None, None) for n, v in cols.items()] if isinstance(cols, dict) else cols
    req = pb.PutRowRequest(table_name=table, row=encode_row(pk, cells))
    req.condition.row_existence = existence
    if condition is not None:
        req.condition.column_condition = condition
    if return_pk:
        req.return_content.return_type = pb.RT_PK
    return wire.call("PutRow", req)


def update(wire: Wire, table: str, pk: list[tuple[str, Any]], cells: list[Any], *, existence: int = 0,
           condition: bytes | None = None) -> Any:
    req = pb.UpdateRowRequest(table_name=table, row_change=encode_row(pk, cells))
    req.condition.row_existence = existence
    if condition is not None:
        req.condition.column_condition = condition
    return wire.call("UpdateRow", req)


def delete(wire: Wire, table: str, pk: list[tuple[str, Any]], *, existence: int = 0) -> Any:
    req = pb.DeleteRowRequest(table_name=table, primary_key=encode_row(pk, [], delete_marker=True))
    req.condition.row_existence = existence
    return wire.call("DeleteRow", req)


def get(wire: Wire, table: str, pk: list[tuple[str, Any]], **kwargs: Any) -> PBRow | None:
    kwargs.setdefault("max_versions", 1)
    time_range = kwargs.pop("time_range", None)
    req = pb.GetRowRequest(table_name=table, primary_key=encode_primary_key(pk), **kwargs)
    if time_range is not None:
        req.time_range.start_time, req.time_range.end_time = time_range
    resp = wire.call("GetRow", req)
    return decode_row(resp.row) if resp.row else None


def get_range(wire: Wire, table: str, start: list[tuple[str, Any]], end: list[tuple[str, Any]], *,
              backward: bool = False, **kwargs: Any) -> tuple[list[PBRow], PBRow | None]:
    kwargs.setdefault("max_versions", 1)
    req = pb.GetRangeRequest(table_name=table, direction=1 if backward else 0,
                             inclusive_start_primary_key=encode_primary_key(start),
                             exclusive_end_primary_key=encode_primary_key(end), **kwargs)
    resp = wire.call("GetRange", req)
    rows = decode_rows(resp.rows) if resp.rows else []
    nxt = decode_row(resp.next_start_primary_key) if resp.HasField("next_start_primary_key") else None
    return rows, nxt


def scan_all(wire: Wire, table: str, start: list[tuple[str, Any]], end: list[tuple[str, Any]],
             **kwargs: Any) -> tuple[list[PBRow], int]:
    """Follow next_start_primary_key to the end; returns all rows and the number of pages."""
    rows: list[PBRow] = []
    pages = 0
    cursor: list[tuple[str, Any]] | None = start
    while cursor is not None:
        page, nxt = get_range(wire, table, cursor, end, **kwargs)
        rows += page
        pages += 1
        cursor = nxt.pk if nxt else None
    return rows, pages


def single_filter(column: str, comparator: int, value: Any, *, pass_if_missing: bool = True,
                  latest_only: bool = True) -> bytes:
    s = fpb.SingleColumnValueFilter(comparator=comparator, column_name=column,
                                    column_value=value_payload(value),
                                    filter_if_missing=not pass_if_missing, latest_version_only=latest_only)
    return fpb.Filter(type=fpb.FT_SINGLE_COLUMN_VALUE, filter=s.SerializeToString()).SerializeToString()


def composite(op: int, *subs: bytes) -> bytes:
    c = fpb.CompositeColumnValueFilter(combinator=op)
    for s in subs:
        c.sub_filters.add().CopyFrom(fpb.Filter.FromString(s))
    return fpb.Filter(type=fpb.FT_COMPOSITE_COLUMN_VALUE, filter=c.SerializeToString()).SerializeToString()
