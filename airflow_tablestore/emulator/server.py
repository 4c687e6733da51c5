"""Threaded HTTP/1.1 server: request verification, routing to the four API surfaces, signed responses.

The four API surfaces — table (:mod:`.table.api`), stream (:mod:`.stream.api`), tunnel (:mod:`.tunnel.api`)
and control (:mod:`.control`) — each give one route table (``routes()``: wire path → handler named after
the action); :class:`Emulator` merges the three signed protobuf ones and hands ``/_emulator/`` paths to the
control surface, which checks its own signature. Every protobuf response (success and error) carries
``x-ots-contentmd5``, ``x-ots-requestid``, ``x-ots-date``, ``x-ots-contenttype`` and a signed
``Authorization`` header, as the official SDKs require.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from airflow_tablestore.emulator import auth
from airflow_tablestore.emulator.api_common import ApiSurface, Handler
from airflow_tablestore.emulator.clock import Clock, ClockError
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.control import CONTROL_PREFIX, ControlApi, FaultRegistry, RequestCounts
from airflow_tablestore.emulator.errors import EmulatorError
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.stream.api import StreamApi
from airflow_tablestore.emulator.table.api import TableApi
from airflow_tablestore.emulator.tunnel.api import TunnelApi
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs

log = logging.getLogger(__name__)

MAX_BODY = 5 * 1024 * 1024


def merge_routes(surfaces: tuple[ApiSurface, ...]) -> dict[str, Handler]:
    """The surfaces' route tables as one. A path two surfaces claim, or one under the control surface's prefix,
    is a ``ValueError`` at start-up (not requests quietly served by whichever table came last)."""
    handlers: dict[str, Handler] = {}
    owners: dict[str, str] = {}
    for surface in surfaces:
        name = type(surface).__name__
        for path, handler in surface.routes().items():
            if path in handlers:
                raise ValueError(f"API path {path!r} is routed by both {owners[path]} and {name}")
            if path.startswith(CONTROL_PREFIX):
                raise ValueError(f"API path {path!r} of {name} is under the control surface's {CONTROL_PREFIX}")
            handlers[path], owners[path] = handler, name
    return handlers


class Emulator:
    """Store + handlers + HTTP server. ``serve_forever()`` until ``shutdown()``."""

    def __init__(self, config: EmulatorConfig, data_dir: str) -> None:
        self.config = config
        self.clock = Clock(offset_seconds=config.clock_offset_s)
        self.store = Store(os.path.join(data_dir, "emulator.sqlite3"), self.clock,
                           stream_partitions=config.stream_partitions,
                           default_retention_hours=config.stream_retention_hours,
                           read_cache_bytes=config.read_cache_mb * 1024 * 1024)
        latest = self.store.stream.latest_stamp_us()
        if latest and config.clock_explicit and self.clock.now_us() <= latest:
            self.store.close()
            raise ClockError(f"the requested clock start is before changes already stored in {data_dir} "
                             f"(newest at {latest / 1e6:.0f} s since the epoch): use an empty --data-dir")
        self.clock.not_before(latest)
        self.faults = FaultRegistry()
        self.requests = RequestCounts()
        self.control = ControlApi(self.store, self.clock, self.faults, config, self.requests)
        surfaces: tuple[ApiSurface, ...] = (TableApi(self.store, self.clock, config),
                                            StreamApi(self.store, self.clock),
                                            TunnelApi(self.store, self.clock, config))
        try:
            self.handlers = merge_routes(surfaces)
        except ValueError:
            self.store.close()
            raise
        log.info("serving %d API actions and %d control ops", len(self.handlers), len(self.control.routes()))
        self._ids = itertools.count(1)
        self._id_prefix = os.urandom(4).hex()
        self.inflight = 0
        self._inflight_lock = threading.Lock()
        self.httpd = _Server((config.host, config.port), _RequestHandler)
        self.httpd.emulator = self

    @property
    def endpoint(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def request_id(self) -> str:
        n = next(self._ids)
        return f"{self._id_prefix}-0000-4000-8000-{n:012x}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop accepting, wait for in-flight requests (up to ``timeout``), close the database."""
        self.httpd.shutdown()
        self.httpd.server_close()
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.01)
        self.store.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    emulator: Emulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Client disconnects are routine (debug); anything else is logged with its traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("connection from %s dropped: %s", client_address, exc)
        else:
            log.exception("error while serving %s", client_address)


_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_MAX_HEADER_LINE = 65536
_MAX_HEADERS = 100


def _http_version(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of ``HTTP/x.y`` (at most 10 ASCII digits each), None when malformed."""
    major, dot, minor = version[5:].partition(".")
    if not version.startswith("HTTP/") or not dot:
        return None
    for part in (major, minor):
        if not (part.isascii() and part.isdigit() and len(part) <= 10):
            return None
    return int(major), int(minor)


class _Headers(dict[str, str]):
    """Request headers by lower-case name; ``get`` takes any case, as ``http.client.HTTPMessage`` does."""

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, name.lower(), default)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle + the client's delayed ACK add
    # ~40 ms to every response with a body on keep-alive connections.
    disable_nagle_algorithm = True
    server: _Server
    raw_requestline: bytes  # set by handle_one_request
    server_version = "TablestoreEmulator"
    sys_version = ""

    def setup(self) -> None:
        # A socket timeout: a stalled or trickling client loses its connection (and frees its thread) instead
        # of holding it until it gives up. Idle keep-alive connections close after the same time.
        self.timeout = self.server.emulator.config.connection_timeout  # type: ignore[misc]
        super().setup()

    def parse_request(self) -> bool:
        """The request line and headers, as http.server's own ``parse_request`` does them but without its
        email-package header parser (a tenth of a 1 000-record read's CPU). Sets ``command``, ``path``,
        ``request_version``, ``headers`` and ``close_connection``; answers malformed input itself (400, 431,
        505) and returns False then.

        ``headers`` maps lower-case names to values (leading blanks and the line end removed, folded
        continuation lines joined); of a repeated header the first wins, as ``HTTPMessage.get`` has it. At most
        100 header lines of 64 KiB."""
        self.command = None  # type: ignore[assignment]
        self.request_version = "HTTP/0.9"
        self.close_connection = True
        self.requestline = line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = line.split()
        if not words:
            return False
        if len(words) >= 3:
            self.request_version = words[-1]  # answers carry a status line unless this stays HTTP/0.9
        if len(words) != 3:
            self.send_error(400, f"Bad request syntax ({line!r})")
            return False
        self.command, self.path, version = words
        number = _http_version(version)
        if number is None:
            self.send_error(400, f"Bad request version ({version!r})")
            return False
        if number >= (2, 0):
            self.send_error(505, f"Invalid HTTP version ({version[5:]})")
            return False
        self.close_connection = number < (1, 1)
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        headers = _Headers()
        last: str | None = None
        for _ in range(_MAX_HEADERS + 1):
            raw = self.rfile.readline(_MAX_HEADER_LINE + 1)
            if len(raw) > _MAX_HEADER_LINE:
                self.send_error(431, "Line too long")
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
            text = raw.decode("iso-8859-1")
            if text[0] in " \t" and last is not None:  # a folded continuation of the previous header
                headers[last] += text.rstrip("\r\n")
                continue
            name, sep, value = text.partition(":")
            if not sep or not name or name != name.strip():
                self.send_error(400, f"Malformed header line ({raw[:80]!r})")
                return False
            last = name.lower()
            if last in headers:
                last = None  # the first of repeated headers wins; a continuation of a later one is dropped
                continue
            headers[last] = value.lstrip(" \t").rstrip("\r\n")
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = headers  # type: ignore[assignment]
        connection = headers.get("connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":  # HTTP/1.0 clients ask for it; the server speaks HTTP/1.1
            self.close_connection = False
        if headers.get("expect", "").lower() == "100-continue" and number >= (1, 1):
            return self.handle_expect_100()
        return True

    _date: tuple[int, str] = (0, "")

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header, formatted once a second (not once an answer)."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        now = int(time.time())
        second, text = _RequestHandler._date
        if second != now:
            text = super().date_time_string(now)
            _RequestHandler._date = (now, text)
        return text

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors http.server detects itself (bad request line, headers too long, unknown method) are answered
        like every other error: a signed protobuf ``Error`` with a request id, and the connection closed."""
        self.close_connection = True
        if code == 501:  # a method http.server has no handler for (OPTIONS, TRACE, ...)
            err = EmulatorError("OTSMethodNotAllowed", "Only POST method for requests is supported.", 405)
        else:
            err = EmulatorError("OTSParameterInvalid", f"Malformed HTTP request: {message or code}.", code)
        uri = self._api_uri() if getattr(self, "path", "") else "/"
        self._send_error_pb(self.server.emulator, uri, None, err)

    # -- request body ---------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        """The request body (Content-Length or chunked), at most ``MAX_BODY`` bytes; malformed framing is a
        400 and closes the connection, since the next request's start can no longer be found."""
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if chunked and self.headers.get("Content-Length") is not None:
            self.close_connection = True
            raise EmulatorError("OTSParameterInvalid", "Both Content-Length and Transfer-Encoding are set.",
                                400)
        if chunked:
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            raise EmulatorError("OTSParameterInvalid", "Invalid Content-Length header.", 400)
        if length > MAX_BODY:
            self.close_connection = True
            raise EmulatorError("OTSRequestBodyTooLarge", "The size of POST data is too large.", 413)
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            self.close_connection = True
            raise EmulatorError("OTSParameterInvalid", "Request body shorter than Content-Length.", 400)
        return body

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                size = -1
            if size < 0 or not line.endswith(b"\n"):
                self.close_connection = True
                raise EmulatorError("OTSParameterInvalid", "Malformed chunked request body.", 400)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise EmulatorError("OTSRequestBodyTooLarge", "The size of POST data is too large.", 413)
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise EmulatorError("OTSParameterInvalid", "Malformed chunked request body.", 400)
            parts.append(chunk)

    # -- routing ------------------------------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802
        emu = self.server.emulator
        with emu._inflight_lock:
            emu.inflight += 1
        try:
            self._handle_post(emu)
        finally:
            with emu._inflight_lock:
                emu.inflight -= 1

    def _method_not_allowed(self) -> None:
        try:
            self._read_body()  # consume it, or the next request on this connection would start inside it
        except EmulatorError:
            self.close_connection = True
        self._send_error_pb(self.server.emulator, self._api_uri(), None,
                            EmulatorError("OTSMethodNotAllowed",
                                          "OTSMethodNotAllowedOnly POST method for requests is supported.",
                                          405))

    do_GET = do_PUT = do_DELETE = do_PATCH = _method_not_allowed  # noqa: N815

    def do_HEAD(self) -> None:  # noqa: N802
        try:
            self._read_body()
        except EmulatorError:
            self.close_connection = True
        self.send_response(405)
        self.send_header("Content-Length", "0")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()

    def _api_uri(self) -> str:
        path = self.path.split("?", 1)[0]
        if path.startswith(CONTROL_PREFIX):
            return path
        idx = path.find("/tunnel/")
        if idx >= 0:
            return path[idx:]
        return "/" + path.rstrip("/").rsplit("/", 1)[-1]

    def _handle_post(self, emu: Emulator) -> None:
        uri = self._api_uri()
        rid = emu.request_id()
        try:
            body = self._read_body()
        except EmulatorError as exc:
            self._send_error_pb(emu, uri, None, exc, rid)
            return
        headers: dict[str, str] = self.headers  # type: ignore[assignment]  # parse_request: lower-case names
        if uri.startswith(CONTROL_PREFIX):
            status, out = emu.control.serve(uri, headers, body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.send_header("x-ots-requestid", rid)
            self.end_headers()
            self.wfile.write(out)
            return
        key: str | None = None
        try:
            key = auth.verify_request(
                uri, headers, body,
                access_key_id=emu.config.access_key_id,
                access_key_secret=emu.config.access_key_secret,
                instance=emu.config.instance,
                now_s=time.time(),
                verify_signature=emu.config.verify_signature,
            )
            handler = emu.handlers.get(uri)
            if handler is None:
                raise EmulatorError("OTSParameterInvalid", f"Unsupported operation: {uri.lstrip('/')}.", 400)
            emu.requests.add(uri)
            emu.faults.apply(uri)
            resp = handler(body)
            self._send_pb(emu, uri, key, 200, resp if isinstance(resp, bytes) else resp.SerializeToString(), rid)
        except EmulatorError as e:
            if key is None:
                key = auth.response_key(headers, emu.config.access_key_secret)
            if e.status >= 500:
                log.warning("request %s %s answered %s %s", rid, uri, e.status, e.code)
            self._send_error_pb(emu, uri, key, e, rid)
        except Exception:
            log.exception("internal error in request %s (%s)", rid, uri)
            self._send_error_pb(emu, uri, key,
                                EmulatorError("OTSInternalServerError", "Internal server error.", 500), rid)

    # -- responses ----------------------------------------------------------------------------------
    def _send_error_pb(self, emu: Emulator, uri: str, key: str | None, err: EmulatorError,
                       rid: str | None = None) -> None:
        msg = pb.Error(code=err.code, message=err.message)
        self._send_pb(emu, uri, key, err.status, msg.SerializeToString(), rid or emu.request_id())

    def _send_pb(self, emu: Emulator, uri: str, key: str | None, status: int, body: bytes, rid: str) -> None:
        headers = {
            "x-ots-contentmd5": auth.content_md5(body),
            "x-ots-requestid": rid,
            "x-ots-date": auth.format_date(time.time()),
            "x-ots-contenttype": "protocol buffer",
        }
        sig = auth.sign_response(key or emu.config.access_key_secret, uri, headers)
        # The head written at once with the body, as send_response/send_header/end_headers would write it:
        # one system call per answer instead of two, and none of their per-header bookkeeping.
        self.log_request(status)
        lines = [f"{self.protocol_version} {status} {_PHRASES.get(status, '')}", f"Server: {self.version_string()}",
                 f"Date: {self.date_time_string()}", *(f"{k}: {v}" for k, v in headers.items()),
                 f"Authorization: OTS {emu.config.access_key_id}:{sig}", f"Content-Length: {len(body)}"]
        if self.close_connection:
            lines.append("Connection: close")
        lines += ("", "")
        self._send_all("\r\n".join(lines).encode("latin-1"), body)

    def _send_all(self, *parts: bytes) -> None:
        """Write ``parts`` in order with as few system calls as the socket takes, without joining them."""
        pending = [memoryview(part) for part in parts if part]
        while pending:
            sent = self.connection.sendmsg(pending)
            while sent:
                if sent >= len(pending[0]):
                    sent -= len(pending.pop(0))
                else:
                    pending[0], sent = pending[0][sent:], 0
