"""HTTP transport shared by the table and tunnel clients: signing, pooling, verification, errors, retries.

Every call is ``POST <endpoint><api path>`` with a protobuf body. The endpoint may carry a path prefix
(``https://host/prefix``); the signature covers only the API path. Responses are checked
(``x-ots-contentmd5`` when present, and optionally the ``Authorization`` signature), error answers become
typed :mod:`~airflow_tablestore.client.errors` exceptions carrying the code, HTTP status and request id,
and retries follow a :class:`~airflow_tablestore.client.retry.RetryPolicy`.

A :class:`Transport` is thread-safe: one pooled connection pool serves concurrent calls.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import requests
import urllib3
from google.protobuf.message import DecodeError, Message
from requests.adapters import HTTPAdapter

from airflow_tablestore.client import auth
from airflow_tablestore.client.errors import (
    NotFoundError,
    TablestoreClientError,
    TablestoreNetworkError,
    TablestoreServiceError,
    error_from_response,
)
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

log = logging.getLogger(__name__)
table_pb2: Any = _table_pb2  # generated code has no type stubs

M = TypeVar("M", bound=Message)

DEFAULT_TIMEOUT: tuple[float, float] = (10.0, 60.0)
UNEXPECTED_RESPONSE = "OTSUnexpectedResponse"
_CODE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{1,127}$")
_PATH_RE = re.compile(r"^/[A-Za-z0-9_/.-]+$")
# Uncompressed answers, as the official SDKs ask: x-ots-contentmd5 is the MD5 of the body as sent.
_BASE_HEADERS = {
    "User-Agent": "airflow-tablestore-python/0.1",
    "Accept-Encoding": "identity",
    "Accept": "*/*",
    "Connection": "keep-alive",
}


@dataclass(frozen=True)
class RawResponse:
    """A verified 2xx answer: body bytes, HTTP status, request id and (lower-cased) headers."""

    body: bytes
    status: int
    request_id: str | None
    headers: dict[str, str]


def parse_endpoint(endpoint: str) -> tuple[str, str]:
    """Validate ``endpoint`` and split it into ``(scheme://host[:port], path prefix without trailing /)``."""
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise TablestoreClientError("endpoint must be a non-empty URL such as https://myinstance.cn-hangzhou.ots.aliyuncs.com")
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https"):
        raise TablestoreClientError(
            f"endpoint must start with http:// or https://, got scheme {parts.scheme or '(none)'!r}"
        )
    if parts.username or parts.password:
        raise TablestoreClientError("endpoint must not embed credentials; pass the AccessKey separately")
    if not parts.hostname:
        raise TablestoreClientError(f"endpoint has no host name: {endpoint!r}")
    if parts.query or parts.fragment:
        raise TablestoreClientError(f"endpoint must not have a query string or fragment: {endpoint!r}")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise TablestoreClientError(f"endpoint has an invalid port: {endpoint!r}") from exc
    return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")


class Transport:
    """Signed protobuf-over-HTTP calls to one Tablestore instance (table API and tunnel paths).

    ``timeout`` is ``(connect_seconds, read_seconds)`` (or one number for both); ``retry`` defaults to
    :class:`RetryPolicy()`; ``pool_size`` bounds the kept-alive connections; ``verify_response_signature``
    checks the ``Authorization`` header of responses that carry one.
    """

    def __init__(
        self,
        endpoint: str,
        credentials: auth.Credentials,
        instance_name: str,
        *,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        api_version: str = auth.API_VERSION,
        pool_size: int = 16,
        verify_response_signature: bool = False,
    ) -> None:
        self._base, self._prefix = parse_endpoint(endpoint)
        if not instance_name or not isinstance(instance_name, str):
            raise TablestoreClientError("instance_name must be a non-empty string")
        if not isinstance(credentials, auth.Credentials):
            raise TablestoreClientError("credentials must be an airflow_tablestore.client.auth.Credentials")
        self.endpoint = self._base + self._prefix
        self.credentials = credentials
        self.instance_name = instance_name
        self.timeout: tuple[float, float] = (
            (float(timeout), float(timeout))
            if isinstance(timeout, int | float)
            else (float(timeout[0]), float(timeout[1]))
        )
        self.retry = retry if retry is not None else RetryPolicy()
        self.api_version = api_version
        self.verify_response_signature = verify_response_signature
        # requests' adapter sets the connection up once, as for any requests call: the environment's proxies
        # (HTTP(S)_PROXY/NO_PROXY, proxy credentials, SOCKS) and TLS against REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE or
        # certifi's bundle. Calls then go to the urllib3 pool it chose, past requests' per-call layers (Session
        # settings, the adapter's pool lookup and TLS checks, Response and cookie objects): none of them applies
        # to a signed POST to one endpoint, and they were a large share of a small call's client CPU.
        self._adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(1, pool_size), max_retries=0)
        proxies = requests.utils.get_environ_proxies(self._base)
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
        probe = requests.Request("POST", self.endpoint + "/").prepare()
        self._pool = cast(urllib3.HTTPConnectionPool,
                          self._adapter.get_connection_with_tls_context(probe, verify, proxies=proxies))
        self._adapter.cert_verify(self._pool, probe.url, verify, None)
        self._target = self._adapter.request_url(probe, proxies)[:-1]  # the full URL through an HTTP proxy
        self._timeout = urllib3.Timeout(connect=self.timeout[0], read=self.timeout[1])
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Transport(endpoint={self.endpoint!r}, instance_name={self.instance_name!r})"

    # -- public API ---------------------------------------------------------------------------------
    def call(self, path: str, request: Message | None, response_cls: type[M], *, idempotent: bool) -> M:
        """Send ``request`` to ``path`` (``/PutRow``, ``/tunnel/readrecords``) and parse ``response_cls``."""
        return self.call_detailed(path, request, response_cls, idempotent=idempotent)[0]

    def call_detailed(
        self, path: str, request: Message | None, response_cls: type[M], *, idempotent: bool
    ) -> tuple[M, str | None]:
        """Like :meth:`call`, also returning the response's request id (for per-row batch errors)."""
        message, raw = self._call_parsed(path, request, response_cls, idempotent=idempotent)
        return message, raw.request_id

    def call_sized(
        self, path: str, request: Message | None, response_cls: type[M], *, idempotent: bool
    ) -> tuple[M, int]:
        """Like :meth:`call`, also returning the response body's size in bytes (what ``ByteSize()`` would
        recompute by re-encoding the whole message)."""
        message, raw = self._call_parsed(path, request, response_cls, idempotent=idempotent)
        return message, len(raw.body)

    def _call_parsed(
        self, path: str, request: Message | None, response_cls: type[M], *, idempotent: bool
    ) -> tuple[M, RawResponse]:
        body = request.SerializeToString() if request is not None else b""
        try:
            raw = self.call_raw(path, body, idempotent=idempotent)
        except NotFoundError as exc:
            raise _naming_table(exc, request) from None
        return self.parse(path, raw, response_cls), raw

    def parse(self, path: str, raw: RawResponse, response_cls: type[M]) -> M:
        """``raw``'s body as a ``response_cls`` (a :class:`TablestoreClientError` naming ``path`` if it is not)."""
        message = response_cls()
        try:
            # MergeFromString: lenient about missing proto2 `required` fields.
            message.MergeFromString(raw.body)
        except (DecodeError, ValueError) as exc:
            raise TablestoreClientError(
                f"{path}: cannot decode the {response_cls.__name__} in the response ({exc})",
                code=UNEXPECTED_RESPONSE, http_status=raw.status, request_id=raw.request_id,
            ) from exc
        return message

    def call_raw(self, path: str, body: bytes, *, idempotent: bool) -> RawResponse:
        """Send raw ``body`` bytes to ``path`` with retries; return the verified 2xx answer."""
        if not _PATH_RE.match(path):
            raise TablestoreClientError(f"invalid API path {path!r}: expected '/<ApiName>' or '/tunnel/<op>'")
        if self._closed:
            raise TablestoreClientError("the transport is closed")
        return self.retry.run(lambda: self._attempt(path, body), idempotent=idempotent, name=path)

    def close(self) -> None:
        """Close pooled connections. Further calls raise."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._adapter.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one attempt --------------------------------------------------------------------------------
    def _attempt(self, path: str, body: bytes) -> RawResponse:
        headers = auth.build_headers(
            self.credentials, self.instance_name, path, body, api_version=self.api_version
        )
        try:
            response = self._pool.urlopen(
                "POST", self._target + path, body=body,
                headers={**_BASE_HEADERS, **headers, "Content-Length": str(len(body))},
                retries=False, redirect=False, assert_same_host=False, timeout=self._timeout,
                preload_content=True, decode_content=False,
            )
            content = response.data
        except urllib3.exceptions.NewConnectionError as exc:  # a ConnectTimeoutError too, but not a timeout
            raise TablestoreNetworkError(f"{path} to {self.endpoint} failed: {_short(exc)}") from None
        except urllib3.exceptions.TimeoutError as exc:
            raise TablestoreNetworkError(f"{path} to {self.endpoint} timed out: {_short(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TablestoreNetworkError(f"{path} to {self.endpoint} failed: {_short(exc)}") from None
        resp_headers = {name.lower(): value for name, value in response.headers.items()}
        status = response.status
        request_id = resp_headers.get(auth.H_REQUEST_ID)

        expected_md5 = resp_headers.get(auth.H_CONTENT_MD5)
        if expected_md5 is not None and not hmac.compare_digest(
            expected_md5.strip(), auth.content_md5(content)
        ):
            raise TablestoreClientError(
                f"{path}: MD5 mismatch in response (x-ots-contentmd5 does not match the body); "
                "the answer was corrupted in transit or by a proxy",
                http_status=status, request_id=request_id,
            )
        if 200 <= status < 300:
            if self.verify_response_signature:
                self._verify_signature(path, headers, resp_headers, status, request_id, required=True)
            return RawResponse(content, status, request_id, resp_headers)
        raise self._error(path, status, response.reason, content, resp_headers, request_id)

    def _error(
        self, path: str, status: int, reason: str | None, content: bytes, headers: dict[str, str],
        request_id: str | None,
    ) -> TablestoreServiceError | TablestoreClientError:
        error = table_pb2.Error()
        try:
            error.MergeFromString(content)
            parsed = error.HasField("code") and bool(_CODE_RE.match(error.code))
        except (DecodeError, ValueError):
            parsed = False
        if parsed:
            return error_from_response(error.code, error.message, status, request_id)
        snippet = content[:160].decode("utf-8", "replace").replace("\n", " ").strip()
        content_type = headers.get("content-type", "unknown content type")
        message = (
            f"{path} answered HTTP {status} {reason or ''}".rstrip()
            + f" with a body that is not a Tablestore error ({content_type}, {len(content)} bytes"
            + (f": {snippet!r})" if snippet else ")")
            + "; check the endpoint URL and any proxy in between"
        )
        return error_from_response(UNEXPECTED_RESPONSE, message, status, request_id)

    def _verify_signature(
        self, path: str, request_headers: dict[str, str], headers: dict[str, str], status: int,
        request_id: str | None, *, required: bool,
    ) -> None:
        authorization = headers.get("authorization")
        if authorization is None:
            if required:
                raise TablestoreClientError(
                    f"{path}: the response has no Authorization header",
                    http_status=status,
                    request_id=request_id,
                )
            return
        key = auth.response_signing_key(self.credentials, request_headers)
        expected = f"OTS {self.credentials.access_key_id}:{auth.response_signature(key, path, headers)}"
        if not hmac.compare_digest(authorization.strip(), expected):
            raise TablestoreClientError(
                f"{path}: invalid signature in response", http_status=status, request_id=request_id
            )


def _naming_table(exc: NotFoundError, request: Message | None) -> NotFoundError:
    """``exc`` with the table the request named, when the service's message ("Requested table does not exist.")
    does not name it: the caller may have read several tables."""
    names = _table_names(request) if request is not None else []
    if len(names) != 1 or "table" not in exc.message.lower() or repr(names[0]) in exc.message:
        return exc
    named = type(exc)(exc.code, f"{exc.message.rstrip('.')}: {names[0]!r}", exc.http_status, exc.request_id)
    return named


def _table_names(request: Any) -> list[str]:
    """The table names a table-API or tunnel request carries (``table_name``, ``table_meta``, ``tables``)."""
    fields = {field.name for field, _ in request.ListFields()}
    if "table_name" in fields:
        return [request.table_name]
    if "table_meta" in fields:
        return [request.table_meta.table_name]
    if "tables" in fields:
        return sorted({table.table_name for table in request.tables})
    return []


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:297] + "..."
