"""The ``/_emulator/*`` JSON control surface (time travel, stream partitions, retention, faults, state).

Requests are ``POST /_emulator/<op>`` with a JSON object body, signed with the emulator's AccessKey secret:
``x-emulator-date`` (epoch seconds, within 15 minutes of the emulator's wall clock) and
``x-emulator-signature`` = base64(HMAC-SHA256(secret, ``"<op>\n<date>\n<sha256 hex of the body>"``)). The
AccessKey ID alone (which every signed response carries) does not open it. Answers are JSON; errors are
``{"error": "..."}`` with status 400/403/404. :meth:`ControlApi.routes` is the surface's route table (one
handler per op, named after it); :class:`ControlClient` signs and wraps every op.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import requests

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.errors import EmulatorError
from airflow_tablestore.emulator.store.database import Store

CONTROL_PREFIX = "/_emulator/"
DATE_HEADER = "x-emulator-date"
SIGNATURE_HEADER = "x-emulator-signature"
MAX_SKEW_S = 15 * 60

ControlHandler = Callable[[dict[str, Any]], dict[str, Any]]
"""A control op: the JSON request object → the JSON answer object."""


def control_signature(secret: str, op: str, date: str, body: bytes) -> str:
    """The ``x-emulator-signature`` of a control request."""
    message = f"{op}\n{date}\n{hashlib.sha256(body).hexdigest()}".encode()
    return base64.b64encode(hmac.new(secret.encode(), message, hashlib.sha256).digest()).decode("ascii")


ANY_PATH = "*"
"""A fault ``path`` matching every API request (not the control surface)."""


@dataclass
class Fault:
    """An injected failure: the next ``count`` requests to ``path`` (``"*"``: any API path) that it hits are
    held for ``delay_s`` and then answered with the error ``code`` — or, without a code, **executed late**,
    after the client may have given up (a write whose client timed out still lands). ``probability`` < 1
    makes each matching request a hit only with that chance (random faults on every endpoint)."""

    path: str
    code: str | None = None
    status: int = 503
    message: str = "Server is busy."
    count: int = 1
    delay_s: float = 0.0
    probability: float = 1.0


class FaultRegistry:
    """Thread-safe list of pending faults consulted by the server before dispatching a request."""

    def __init__(self, seed: int | None = None) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    def seed(self, seed: int | None) -> None:
        """Make the choice of probabilistic hits reproducible."""
        with self._lock:
            self._random.seed(seed)

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(f) for f in self._faults]

    def apply(self, path: str) -> None:
        """Consume one matching fault: sleep ``delay_s``, then raise its error if it has a ``code``."""
        if not self._faults:
            return
        with self._lock:
            fault = next((f for f in self._faults if f.path in (path, ANY_PATH) and f.count > 0
                          and (f.probability >= 1.0 or self._random.random() < f.probability)), None)
            if fault is None:
                return
            fault.count -= 1
            if fault.count <= 0:
                self._faults.remove(fault)
        if fault.delay_s > 0:
            time.sleep(fault.delay_s)
        if fault.code:
            raise EmulatorError(fault.code, fault.message, fault.status)


class RequestCounts:
    """How many requests each API path answered since the start (or the last reset): what a benchmark reads to
    state requests per record by API."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, path: str) -> None:
        with self._lock:
            self._counts[path] = self._counts.get(path, 0) + 1

    def take(self, reset: bool = False) -> dict[str, int]:
        with self._lock:
            counts = dict(self._counts)
            if reset:
                self._counts.clear()
        return counts


class ControlApi:
    """Server side of the control surface."""

    def __init__(self, store: Store, clock: Clock, faults: FaultRegistry, config: EmulatorConfig,
                 requests: RequestCounts | None = None) -> None:
        self.store = store
        self.clock = clock
        self.faults = faults
        self.config = config
        self.requests = requests or RequestCounts()
        self._routes = self.routes()

    def routes(self) -> dict[str, ControlHandler]:
        """The route table: wire path → handler (raising ``KeyError`` → 404, ``ValueError`` → 400)."""
        return {
            CONTROL_PREFIX + "time/advance": self.advance_time,
            CONTROL_PREFIX + "time/set": self.set_time,
            CONTROL_PREFIX + "stream/split": self.split_partition,
            CONTROL_PREFIX + "stream/merge": self.merge_partitions,
            CONTROL_PREFIX + "stream/partitions": self.partitions,
            CONTROL_PREFIX + "stream/retention": self.set_retention,
            CONTROL_PREFIX + "stream/trim": self.trim,
            CONTROL_PREFIX + "faults/add": self.add_fault,
            CONTROL_PREFIX + "faults/clear": self.clear_faults,
            CONTROL_PREFIX + "state": self.state,
            CONTROL_PREFIX + "requests": self.request_counts,
        }

    def advance_time(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.clock.advance(float(payload["seconds"]))
        return {"offset_seconds": self.clock.offset_seconds, "now_us": self.clock.now_us()}

    def set_time(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.clock.set_now(float(payload["epoch_seconds"]))
        return {"offset_seconds": self.clock.offset_seconds, "now_us": self.clock.now_us()}

    def split_partition(self, payload: dict[str, Any]) -> dict[str, Any]:
        children = self.store.stream.split_partition(payload["table"], payload.get("partition_id"))
        return {"children": [p._asdict() for p in children]}

    def merge_partitions(self, payload: dict[str, Any]) -> dict[str, Any]:
        child = self.store.stream.merge_partitions(payload["table"], payload.get("first_id"),
                                                   payload.get("second_id"))
        return {"child": child._asdict()}

    def partitions(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"partitions": [p._asdict() for p in self.store.stream.partitions(payload["table"])]}

    def set_retention(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.store.tables.set_stream_retention(payload["table"], float(payload["hours"]))
        trimmed = self.store.stream.trim(payload["table"], force=True)
        return {"table": payload["table"], "hours": payload["hours"], "trimmed": trimmed}

    def trim(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"trimmed": self.store.stream.trim(payload["table"], force=True)}

    def add_fault(self, payload: dict[str, Any]) -> dict[str, Any]:
        fault = Fault(
            path=str(payload["path"]),
            code=payload.get("code"),
            status=int(payload.get("status", 503)),
            message=str(payload.get("message", "Server is busy.")),
            count=int(payload.get("count", 1)),
            delay_s=float(payload.get("delay_s", 0.0)),
            probability=float(payload.get("probability", 1.0)),
        )
        if not fault.path.startswith("/") and fault.path != ANY_PATH:
            raise ValueError(
                "fault path must start with '/', e.g. '/PutRow' or '/tunnel/readrecords', or be '*'")
        if not 0.0 < fault.probability <= 1.0:
            raise ValueError("fault probability must be in (0, 1]")
        if "seed" in payload:
            self.faults.seed(int(payload["seed"]))
        self.faults.add(fault)
        return {"faults": self.faults.pending()}

    def clear_faults(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.faults.clear()
        return {"faults": []}

    def request_counts(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"requests": self.requests.take(reset=bool(payload.get("reset", False)))}

    def state(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "instance": self.config.instance,
            "clock_offset_seconds": self.clock.offset_seconds,
            "now_us": self.clock.now_us(),
            "faults": self.faults.pending(),
            **self.store.state(),
        }

    def authorized(self, op: str, headers: dict[str, str], body: bytes) -> str | None:
        """``None`` when the request is signed with the emulator's secret and dated now; else why not."""
        date, signature = headers.get(DATE_HEADER, ""), headers.get(SIGNATURE_HEADER, "")
        if not date or not signature:
            return f"control requests must be signed ({DATE_HEADER}, {SIGNATURE_HEADER}): use ControlClient"
        try:
            skew = abs(float(date) - time.time())
        except ValueError:
            return f"malformed {DATE_HEADER}"
        if not skew <= MAX_SKEW_S:
            return f"{DATE_HEADER} is more than {MAX_SKEW_S} s away from the emulator's clock"
        expected = control_signature(self.config.access_key_secret, op, date, body)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogateescape")):
            return "signature mismatch (signed with another AccessKey secret?)"
        return None

    def serve(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        """HTTP adapter for ``POST /_emulator/<op>``: returns ``(status, json body)``."""
        op = path[len(CONTROL_PREFIX):]
        refused = self.authorized(op, headers, body)
        if refused:
            return 403, json.dumps({"error": refused}).encode()
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("body must be a JSON object")
            handler = self._routes.get(path)
            if handler is None:
                raise KeyError(f"unknown control op: {op}")
            return 200, json.dumps(handler(payload)).encode()
        except KeyError as e:
            return 404, json.dumps({"error": f"not found: {e}"}).encode()
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            return 400, json.dumps({"error": str(e)[:500]}).encode()
        except EmulatorError as e:
            return e.status if e.status < 500 else 400, json.dumps({"error": e.message[:500]}).encode()


class ControlError(RuntimeError):
    """A control request was refused."""


class ControlClient:
    """Client of the control surface: ``ControlClient(emu.endpoint, secret).advance_time(3600)`` (or
    ``EmulatorProcess.control``, which passes the secret). The secret never appears in its ``repr``."""

    def __init__(self, endpoint: str, access_key_secret: str = "emulator-access-key-secret",
                 timeout: float = 30.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._secret = access_key_secret
        self.timeout = timeout
        self._session = requests.Session()

    def __repr__(self) -> str:
        return f"ControlClient(endpoint={self.endpoint!r})"

    def call(self, op: str, **payload: Any) -> dict[str, Any]:
        """POST one signed op; raises :class:`ControlError` on a non-200 answer."""
        body = json.dumps(payload).encode()
        date = f"{time.time():.3f}"
        resp = self._session.post(
            self.endpoint + CONTROL_PREFIX + op,
            data=body,
            headers={DATE_HEADER: date, SIGNATURE_HEADER: control_signature(self._secret, op, date, body),
                     "Content-Type": "application/json"},
            timeout=self.timeout,
        )
        data: dict[str, Any] = resp.json()
        if resp.status_code != 200:
            raise ControlError(f"{op}: HTTP {resp.status_code}: {data.get('error')}")
        return data

    def advance_time(self, seconds: float) -> dict[str, Any]:
        """Move the emulator clock (TTL, stream retention, tunnel timeouts) forward by ``seconds`` (> 0; the
        clock never goes back, see :meth:`Clock.advance`)."""
        return self.call("time/advance", seconds=seconds)

    def set_time(self, epoch_seconds: float) -> dict[str, Any]:
        """Set the emulator clock to ``epoch_seconds`` (not earlier than any time it has already handed
        out)."""
        return self.call("time/set", epoch_seconds=epoch_seconds)

    def split_partition(self, table: str, partition_id: str | None = None) -> list[dict[str, Any]]:
        """Split a stream partition (default: the first open one); returns the two children."""
        return list(self.call("stream/split", table=table, partition_id=partition_id)["children"])

    def merge_partitions(self, table: str, first_id: str | None = None,
                         second_id: str | None = None) -> dict[str, Any]:
        """Merge two adjacent open stream partitions (default: the first adjacent pair); returns the child."""
        return dict(self.call("stream/merge", table=table, first_id=first_id, second_id=second_id)["child"])

    def partitions(self, table: str) -> list[dict[str, Any]]:
        """All stream partitions of ``table`` (partition_id, parent_ids, closed, created_seq, ...)."""
        return list(self.call("stream/partitions", table=table)["partitions"])

    def set_retention(self, table: str, hours: float) -> dict[str, Any]:
        """Override the stream retention of ``table`` and trim immediately."""
        return self.call("stream/retention", table=table, hours=hours)

    def trim(self, table: str) -> int:
        """Trim expired stream records of ``table`` now; returns how many were removed."""
        return int(self.call("stream/trim", table=table)["trimmed"])

    def request_counts(self, *, reset: bool = False) -> dict[str, int]:
        """Requests answered per API path (``/ReadRecords``, ``/Heartbeat``, ...) since the start or the last
        ``reset=True``."""
        return dict(self.call("requests", reset=reset)["requests"])

    def add_fault(self, path: str, code: str | None = "OTSServerBusy", *, status: int = 503,
                  message: str = "Server is busy.", count: int = 1, delay_s: float = 0.0,
                  probability: float = 1.0, seed: int | None = None) -> dict[str, Any]:
        """Make the next ``count`` requests to ``path`` (e.g. ``/PutRow``, or ``"*"`` for every API path) that
        the fault hits (each with ``probability``) fail with ``code``/``status`` after ``delay_s``; with
        ``code=None`` they are held ``delay_s`` and then executed (late, if the client gave up)."""
        extra: dict[str, Any] = {} if seed is None else {"seed": seed}
        return self.call("faults/add", path=path, code=code, status=status, message=message, count=count,
                         delay_s=delay_s, probability=probability, **extra)

    def clear_faults(self) -> None:
        self.call("faults/clear")

    def state(self) -> dict[str, Any]:
        """Tables with row counts, stream head seq, record and snapshot counts, clock offset, faults."""
        return self.call("state")

    def close(self) -> None:
        self._session.close()
