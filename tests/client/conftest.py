"""Fixtures of the client tests: a scripted local HTTP server and a shared emulator process."""

from __future__ import annotations

import base64
import hashlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class ScriptedReply:
    """One programmed answer. ``md5=None`` computes the right x-ots-contentmd5; ``md5=""`` omits it."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    md5: str | None = None
    request_id: str | None = "req-scripted"
    delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedServer:
    """Answers each POST with the next programmed :class:`Reply` (the last one repeats)."""

    def __init__(self) -> None:
        self.replies: list[ScriptedReply] = [ScriptedReply()]
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with outer._lock:
                    outer.requests.append(
                        Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    reply = outer.replies.pop(0) if len(outer.replies) > 1 else outer.replies[0]
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self.send_response(reply.status)
                if reply.md5 is None:
                    self.send_header(
                        "x-ots-contentmd5", base64.b64encode(hashlib.md5(reply.body).digest()).decode()
                    )
                elif reply.md5:
                    self.send_header("x-ots-contentmd5", reply.md5)
                if reply.request_id:
                    self.send_header("x-ots-requestid", reply.request_id)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    Reply = ScriptedReply

    def script(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self.replies = list(replies)
            self.requests = []

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


# ---- a real emulator process for the table API tests ----------------------------------------------

RANGE_PAGE_ROWS = 7


@pytest.fixture(scope="session")
def tablestore_emulator() -> Iterator[Any]:
    """The client tests' emulator (overrides the plugin's): small range pages so pagination is exercised."""
    from airflow_tablestore.emulator.testing import EmulatorProcess

    with EmulatorProcess(extra_args=["--range-page-rows", str(RANGE_PAGE_ROWS)]) as emu:
        emu.range_page_rows = RANGE_PAGE_ROWS  # type: ignore[attr-defined]
        yield emu


@pytest.fixture()
def table_client(tablestore_emulator: Any) -> Iterator[Any]:
    """Unlike the plugin's ``tablestore_client``: short timeouts and a 3-attempt retry budget, so error-path
    tests fail fast."""
    from airflow_tablestore.client import RetryPolicy, TableClient

    with TableClient(**tablestore_emulator.client_kwargs, timeout=(5, 30),
                     retry=RetryPolicy(max_attempts=3, total_budget_s=10)) as client:
        yield client


_counter = itertools.count()


@pytest.fixture()
def unique_name(request: pytest.FixtureRequest) -> str:
    """A fresh, valid table name per test."""
    base = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:40]
    return f"t_{base}_{next(_counter)}"
