"""Raw-HTTP access to a running emulator for the tunnel tests: a tiny V2 signer, table setup and writes.

Independent of ``airflow_tablestore.client`` (written concurrently): requests + protobuf + the emulator's own
PlainBuffer encoder for the rows we write.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from typing import Any

import requests

from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2
from testing.emulator_tunnel import CallError, Tunnel

table_pb2: Any = _table_pb2
tunnel_pb2: Any = _tunnel_pb2


def sign_v2(secret: str, uri: str, headers: dict[str, str]) -> str:
    """HMAC-SHA1 over ``uri\\nPOST\\n\\n`` + sorted ``x-ots-*`` headers (the reference's V2 rule)."""
    canon = uri + "\nPOST\n\n" + "".join(
        f"{k}:{v.strip()}\n" for k, v in sorted(headers.items()) if k.startswith("x-ots-") and k != "x-ots-signature")
    return base64.b64encode(hmac.new(secret.encode(), canon.encode(), hashlib.sha1).digest()).decode()


def v2_headers(access_key_id: str, access_key_secret: str, instance: str, uri: str, body: bytes,
               overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """V2-signed request headers. ``overrides`` replace headers (``None`` drops one) before signing."""
    now = dt.datetime.now(dt.UTC)
    headers = {
        "x-ots-date": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": access_key_id,
        "x-ots-instancename": instance,
        "x-ots-contentmd5": base64.b64encode(hashlib.md5(body).digest()).decode(),
    }
    for name, value in (overrides or {}).items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    headers["x-ots-signature"] = sign_v2(access_key_secret, uri, headers)
    return headers


def signed_headers(emu: EmulatorProcess, uri: str, body: bytes, overrides: dict[str, str | None] | None = None,
                   signature: str | None = None) -> dict[str, str]:
    """V2-signed request headers for ``emu`` (:func:`v2_headers`); ``signature`` replaces the computed signature
    afterwards (for tests of bad requests)."""
    headers = v2_headers(emu.access_key_id, emu.access_key_secret, emu.instance, uri, body, overrides)
    if signature is not None:
        headers["x-ots-signature"] = signature
    return headers


class Http:
    """Signed protobuf POSTs against one emulator."""

    def __init__(self, emu: EmulatorProcess) -> None:
        self.emu = emu
        self.session = requests.Session()

    def post_raw(self, uri: str, body: bytes) -> requests.Response:
        return self.session.post(self.emu.endpoint + uri, data=body, headers=signed_headers(self.emu, uri, body),
                                 timeout=60)

    def call(self, uri: str, request: Any, response_cls: Any) -> Any:
        resp = self.post_raw(uri, request.SerializeToString())
        if resp.status_code != 200:
            err = tunnel_pb2.Error()
            err.ParseFromString(resp.content)
            assert resp.headers.get("x-ots-requestid"), "error responses must carry x-ots-requestid"
            raise CallError(err.code, resp.status_code, err.message)
        out = response_cls()
        out.ParseFromString(resp.content)
        return out

    def tunnel(self) -> Tunnel:
        return Tunnel(self.call)

    # -- table setup ----------------------------------------------------------------------------------
    def create_table(self, name: str, *, stream: bool = True, expiration_hours: int = 24) -> str:
        req = table_pb2.CreateTableRequest(
            table_meta=table_pb2.TableMeta(table_name=name,
                                           primary_key=[table_pb2.PrimaryKeySchema(name="pk", type=1)]),
            reserved_throughput=table_pb2.ReservedThroughput(capacity_unit=table_pb2.CapacityUnit(read=0, write=0)),
            table_options=table_pb2.TableOptions(time_to_live=-1, max_versions=1),
        )
        if stream:
            req.stream_spec.CopyFrom(table_pb2.StreamSpecification(enable_stream=True,
                                                                   expiration_time=expiration_hours))
        self.call("/CreateTable", req, table_pb2.CreateTableResponse)
        return name

    def write(self, table: str, puts: dict[int, str] | None = None, deletes: list[int] | None = None) -> None:
        """One BatchWriteRow (≤200 rows): PUT ``col`` for ``puts``, DELETE rows for ``deletes``; all must succeed."""
        rows = []
        for pk, value in (puts or {}).items():
            rows.append(table_pb2.RowInBatchWriteRowRequest(
                type=1, row_change=encode_row([("pk", pk)], [("col", value, None, None)]),
                condition=table_pb2.Condition(row_existence=0)))
        for pk in deletes or []:
            rows.append(table_pb2.RowInBatchWriteRowRequest(
                type=3, row_change=encode_row([("pk", pk)], [], delete_marker=True),
                condition=table_pb2.Condition(row_existence=0)))
        req = table_pb2.BatchWriteRowRequest(
            tables=[table_pb2.TableInBatchWriteRowRequest(table_name=table, rows=rows)])
        resp = self.call("/BatchWriteRow", req, table_pb2.BatchWriteRowResponse)
        assert all(r.is_ok for t in resp.tables for r in t.rows), resp

    def write_many(self, table: str, values: dict[int, str]) -> None:
        items = list(values.items())
        for i in range(0, len(items), 200):
            self.write(table, dict(items[i:i + 200]))
