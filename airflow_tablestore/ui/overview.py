"""The page's content for one user: the Tablestore connections they may read, each with its tunnels, channels,
lag and stuck verdicts, and the run history of the DAGs they may read that consume those tunnels."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from airflow_tablestore.client.epoch import datetime_to_ns, ns_to_iso
from airflow_tablestore.client.model import ChannelInfo
from airflow_tablestore.ui import health, instances, metadata
from airflow_tablestore.ui.health import Consumers
from airflow_tablestore.ui.instances import InstanceView, Limits, TunnelView
from airflow_tablestore.ui.metadata import Binding, RunPoint

HISTORY_RUNS = 20


@dataclass(frozen=True)
class ChannelRow:
    channel: ChannelInfo
    lag_s: float | None
    stuck: str | None


@dataclass(frozen=True)
class TunnelRow:
    view: TunnelView
    channels: tuple[ChannelRow, ...]
    dag_ids: tuple[str, ...]  # DAGs (the user may read) with a task that uses the tunnel
    lag_s: float | None  # now minus the tunnel's consume point (its slowest stream channel)

    @property
    def stuck(self) -> int:
        return sum(1 for row in self.channels if row.stuck)


@dataclass(frozen=True)
class InstanceRow:
    view: InstanceView
    tunnels: tuple[TunnelRow, ...]

    @property
    def streams_without_tunnel(self) -> list[str]:
        used = {t.view.info.table_name for t in self.tunnels}
        return [name for name in self.view.stream_tables if name not in used]


@dataclass(frozen=True)
class DagHistory:
    dag_id: str
    tunnels: tuple[tuple[str, str, str], ...]  # (conn id, table, tunnel) it consumes
    runs: tuple[RunPoint, ...]  # oldest first


@dataclass
class Overview:
    now: datetime
    instances: list[InstanceRow] = field(default_factory=list)
    histories: list[DagHistory] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def requests(self) -> int:
        return sum(row.view.requests for row in self.instances)

    def as_dict(self) -> dict[str, Any]:
        """The same content as JSON-ready values (the page's ``/api/overview``)."""
        return {
            "generated_at": self.now.isoformat(),
            "seconds": round(self.seconds, 3),
            "requests": self.requests,
            "connections": [_instance_dict(row) for row in self.instances],
            "dags": [{"dag_id": h.dag_id,
                      "tunnels": [{"conn_id": c, "table": t, "tunnel": n} for c, t, n in h.tunnels],
                      "runs": [_run_dict(r) for r in h.runs]} for h in self.histories],
        }


def _instance_dict(row: InstanceRow) -> dict[str, Any]:
    view = row.view
    return {
        "conn_id": view.conn_id, "instance": view.instance_name, "endpoint": view.endpoint, "error": view.error,
        "notes": view.notes, "requests": view.requests, "stream_tables": view.stream_tables,
        "tunnels": [{
            "table": t.view.info.table_name, "tunnel": t.view.info.tunnel_name, "tunnel_id": t.view.info.tunnel_id,
            "type": str(t.view.info.tunnel_type), "stage": str(t.view.info.stage),
            "created": ns_to_iso(t.view.info.create_time_ns), "expired": t.view.info.expired,
            "consume_point": ns_to_iso(t.view.consume_point_ns), "lag_s": t.lag_s, "error": t.view.error,
            "dags": list(t.dag_ids),
            "channels": [{"channel_id": c.channel.channel_id, "type": c.channel.channel_type,
                          "status": str(c.channel.status), "client_id": c.channel.client_id,
                          "consume_point": ns_to_iso(c.channel.consume_point_ns), "lag_s": c.lag_s,
                          "row_count": c.channel.row_count, "stuck": c.stuck} for c in t.channels],
        } for t in row.tunnels],
    }


def _run_dict(run: RunPoint) -> dict[str, Any]:
    return {"run_id": run.run_id, "state": run.state, "start": run.start.isoformat() if run.start else None,
            "end": run.end.isoformat() if run.end else None, "duration_s": run.duration_s,
            "records": run.records, "lag_s": run.lag_s}


def build(session: Session, conn_ids: Iterable[str], dag_ids: Iterable[str], limits: Limits | None = None,
          collect: Callable[..., list[InstanceView]] = instances.collect) -> Overview:
    """Everything the page shows for ``conn_ids`` (connections the user may read) and ``dag_ids`` (DAGs the
    user may read)."""
    started = time.monotonic()
    now = datetime.now(UTC)
    now_ns = datetime_to_ns(now)
    allowed = set(conn_ids)
    bindings = [b for b in metadata.tunnel_bindings(session, dag_ids) if b.conn_id in allowed]
    running = metadata.active_consumers(session, bindings)
    histories = _histories(session, bindings)
    runs_of = {h.dag_id: h.runs for h in histories}
    views = collect(sorted(allowed), limits)
    rows = []
    for view in views:
        tunnels = []
        for tunnel in view.tunnels:
            info = tunnel.info
            users = [b for b in bindings if (b.conn_id, b.table, b.tunnel) == (view.conn_id, info.table_name,
                                                                                  info.tunnel_name)]
            dag_ids_here = tuple(sorted({b.dag_id for b in users}))
            consumer_dags = sorted({b.dag_id for b in users if b.consumes}) or list(dag_ids_here)
            merged = sorted((r for d in consumer_dags for r in runs_of.get(d, ())),
                            key=lambda r: r.end or now)
            consumers = Consumers(tuple(consumer_dags), tuple(merged), any(d in running for d in consumer_dags))
            channels = tuple(ChannelRow(c, health.lag_s(c, now_ns), health.stuck_reason(c, consumers, now_ns))
                             for c in tunnel.channels)
            lag = (now_ns - tunnel.consume_point_ns) / 1e9 if tunnel.consume_point_ns else None
            tunnels.append(TunnelRow(tunnel, channels, dag_ids_here, lag))
        rows.append(InstanceRow(view, tuple(tunnels)))
    return Overview(now, rows, histories, time.monotonic() - started)


def _histories(session: Session, bindings: list[Binding]) -> list[DagHistory]:
    by_dag: dict[str, list[Binding]] = {}
    for binding in bindings:
        by_dag.setdefault(binding.dag_id, []).append(binding)
    histories = []
    for dag_id, items in sorted(by_dag.items()):
        consumers = [b for b in items if b.consumes]
        if not consumers:
            continue  # a DAG that only manages or watches a tunnel has no replication history
        runs = metadata.run_history(session, dag_id, {b.task_id for b in consumers}, HISTORY_RUNS)
        tunnels = tuple(sorted({(b.conn_id, b.table, b.tunnel) for b in consumers}))
        histories.append(DagHistory(dag_id, tunnels, tuple(runs)))
    return histories
