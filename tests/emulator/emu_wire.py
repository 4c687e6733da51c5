"""Minimal raw-HTTP client for emulator tests: V2 signing, PlainBuffer building via the emulator codec.

Deliberately independent of ``airflow_tablestore.client`` (written concurrently); uses ``requests``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from typing import Any

import requests
from google.protobuf.message import Message

from airflow_tablestore.protocol import ots_filter_pb2, ots_table_pb2

pb: Any = ots_table_pb2
fpb: Any = ots_filter_pb2


class WireError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def sign(secret: str, uri: str, headers: dict[str, str]) -> str:
    items = sorted((k, v.strip()) for k, v in headers.items() if k.startswith("x-ots-") and k != "x-ots-signature")
    canonical = uri + "\nPOST\n\n" + "".join(f"{k}:{v}\n" for k, v in items)
    return base64.b64encode(hmac.new(secret.encode(), canonical.encode(), hashlib.sha1).digest()).decode()


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
        now = dt.datetime.now(dt.UTC)
        h = {
            "x-ots-date": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "x-ots-apiversion": "2015-12-31",
            "x-ots-accesskeyid": self.akid,
            "x-ots-instancename": self.instance,
            "x-ots-contentmd5": base64.b64encode(hashlib.md5(body).digest()).decode(),
        }
        h.update(overrides)
        h["x-ots-signature"] = sign(self.secret, uri, h)
        return h

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
