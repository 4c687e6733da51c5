"""One bounded pass over Tablestore connections: tables with a stream, their tunnels and each tunnel's channels.

Per connection: ListTable and ListTunnel (one call each), DescribeTunnel per tunnel and DescribeTable per table
that has no tunnel (each capped by :class:`Limits`), several at a time. Every call has short timeouts and at
most one retry, and the whole pass has a deadline: a connection that fails or does not answer in time keeps
its error in its own :class:`InstanceView` and the others are shown. Read-only: nothing here writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import ChannelInfo, TableDescription, TunnelDescription, TunnelInfo
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """How much one page view may ask of Tablestore."""

    max_connections: int = 20  # connections looked at per view (the rest are listed as not shown)
    max_tunnels: int = 50  # DescribeTunnel calls per connection
    max_tables: int = 50  # DescribeTable calls per connection (tables without a tunnel)
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 5.0
    attempts: int = 2  # each call: the first try and at most one retry of a transient failure
    concurrency: int = 8  # calls in flight at once, over all connections
    deadline_s: float = 12.0  # the whole pass

    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.attempts, total_budget_s=self.connect_timeout_s + self.read_timeout_s)


@dataclass(frozen=True)
class TunnelView:
    """A tunnel as ListTunnel lists it, with DescribeTunnel's channels (or the error DescribeTunnel gave)."""

    info: TunnelInfo
    channels: tuple[ChannelInfo, ...] = ()
    consume_point_ns: int = 0
    error: str | None = None


@dataclass
class InstanceView:
    """What one connection's instance shows; ``error`` says why a part is missing."""

    conn_id: str
    instance_name: str | None = None
    endpoint: str | None = None
    stream_tables: list[str] = field(default_factory=list)  # tables with a stream, sorted
    tunnels: list[TunnelView] = field(default_factory=list)  # sorted by table, then tunnel name
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # caps that cut the listing short
    requests: int = 0  # service calls made for this view (retries of a failed call not counted)


def describe_error(err: BaseException) -> str:
    """One line for the page: a Tablestore error as the client words it (code, message, request id), else the
    exception's type and first line. Client errors and connection parsing never carry credentials."""
    if isinstance(err, TablestoreClientError):
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    first = (str(err).splitlines() or [""])[0][:300]
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


class _Calls:
    """The calls of one connection: counted, run on the shared pool, bounded by the pass deadline."""

    def __init__(self, pool: ThreadPoolExecutor, deadline: float) -> None:
        self.pool, self.deadline = pool, deadline
        self.count = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        with self._lock:
            self.count += 1
        return self.pool.submit(fn)

    def gather(self, futures: Iterable[Future[Any]]) -> None:
        _, not_done = wait(list(futures), timeout=max(0.0, self.deadline - time.monotonic()))
        if not_done:
            raise TimeoutError("no answer before the page's deadline")


class ConnectionUnreadable(RuntimeError):
    """Airflow could not load the connection (a malformed URI or JSON, a failing secrets backend)."""


def _settings(conn_id: str, limits: Limits) -> ConnectionSettings:
    hook = TablestoreTunnelHook(conn_id, connect_timeout=limits.connect_timeout_s,
                                read_timeout=limits.read_timeout_s)
    try:
        return hook.get_config()
    except TablestoreClientError:
        raise  # the hook's own messages name the field, never a value that could be secret
    except Exception as err:
        # Not the message: a parser's error may quote the connection, password included.
        raise ConnectionUnreadable(f"Airflow could not load connection {conn_id!r} ({type(err).__name__}); "
                                   "check its definition (Admin > Connections, or its AIRFLOW_CONN_* "
                                   "variable or secrets backend)") from None


def _collect_one(view: InstanceView, limits: Limits, pool: ThreadPoolExecutor, deadline: float) -> None:
    settings = _settings(view.conn_id, limits)
    view.instance_name, view.endpoint = settings.instance_name, settings.endpoint
    kwargs = {**settings.client_kwargs(), "timeout": (limits.connect_timeout_s, limits.read_timeout_s),
              "retry": limits.retry()}
    calls = _Calls(pool, deadline)
    try:
        with TunnelClient(**kwargs) as tunnels_api, TableClient(**kwargs) as tables_api:
            listed_tunnels = calls.submit(tunnels_api.list_tunnels)
            listed_tables = calls.submit(tables_api.list_tables)
            calls.gather([listed_tunnels, listed_tables])
            infos = sorted(listed_tunnels.result(), key=lambda t: (t.table_name, t.tunnel_name))
            tables = sorted(listed_tables.result())
            if len(infos) > limits.max_tunnels:
                view.notes.append(f"showing {limits.max_tunnels} of {len(infos)} tunnels")
            shown = infos[:limits.max_tunnels]
            with_tunnel = {t.table_name for t in infos}
            others = [t for t in tables if t not in with_tunnel]
            if len(others) > limits.max_tables:
                view.notes.append(f"stream checked on {limits.max_tables} of {len(others)} tables without a tunnel")
            described: list[Future[TunnelDescription]] = [
                calls.submit(partial(tunnels_api.describe_tunnel, t.table_name, t.tunnel_name)) for t in shown]
            tables_described: list[Future[TableDescription]] = [
                calls.submit(partial(tables_api.describe_table, name)) for name in others[:limits.max_tables]]
            pending: list[Future[Any]] = [*described, *tables_described]
            wait(pending, timeout=max(0.0, deadline - time.monotonic()))
            for info, tunnel in zip(shown, described, strict=True):
                view.tunnels.append(_tunnel_view(info, tunnel))
            streamed = set(with_tunnel)
            for name, table in zip(others, tables_described, strict=False):
                if table.done() and table.exception() is None:
                    if table.result().stream.enabled:
                        streamed.add(name)
                else:
                    view.notes.append(f"table {name}: {_future_error(table)}")
            view.stream_tables = sorted(streamed)
    finally:
        view.requests = calls.count


def _future_error(future: Future[Any]) -> str:
    if not future.done():
        future.cancel()
        return "no answer before the page's deadline"
    exc = future.exception()
    return describe_error(exc) if exc is not None else ""


def _tunnel_view(info: TunnelInfo, future: Future[Any]) -> TunnelView:
    if not future.done() or future.exception() is not None:
        return TunnelView(info, error=_future_error(future))
    desc = future.result()
    channels = tuple(sorted(desc.channels, key=lambda c: c.channel_id))
    return TunnelView(desc.tunnel, channels, desc.consume_point_ns)


def collect(conn_ids: Iterable[str], limits: Limits | None = None) -> list[InstanceView]:
    """One :class:`InstanceView` per connection id (in the given order), each complete or with its error."""
    limits = limits or Limits()
    ids = list(dict.fromkeys(conn_ids))
    views = [InstanceView(conn_id) for conn_id in ids[:limits.max_connections]]
    deadline = time.monotonic() + limits.deadline_s
    # Connection-level work waits on call-level work: two pools, so waiting never holds a worker a call needs.
    # Not context managers: leaving one waits for calls in flight, and the page does not wait past its deadline
    # (a late call ends by its own timeouts).
    pool = ThreadPoolExecutor(max_workers=limits.concurrency, thread_name_prefix="tablestore-ui-call")
    outer = ThreadPoolExecutor(max_workers=min(len(views), limits.concurrency) or 1,
                               thread_name_prefix="tablestore-ui-conn")
    try:
        jobs = [outer.submit(_collect_one, view, limits, pool, deadline) for view in views]
        wait(jobs, timeout=limits.deadline_s + 1)
        for view, job in zip(views, jobs, strict=True):
            error = job.exception() if job.done() else TimeoutError("no answer before the page's deadline")
            if error is not None:
                view.error = describe_error(error)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        outer.shutdown(wait=False, cancel_futures=True)
    if len(ids) > limits.max_connections:
        views.append(InstanceView(", ".join(ids[limits.max_connections:]),
                                  error=f"not shown: at most {limits.max_connections} connections per view"))
    return views
