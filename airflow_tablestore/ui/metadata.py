"""What Airflow's metadata says about Tablestore: the connections, which DAG tasks use which tunnel, and what
the recent runs of those DAGs recorded (their consumer summaries in XCom, their times). Read-only queries.

A task *uses* a tunnel when it is a task of this provider whose ``tablestore_conn_id``, ``table_name`` and
``tunnel_name`` (or the Spark consumer's ``--table``/``--tunnel`` arguments) are literal values or the DAG's
parameter defaults (``{{ params.<name> }}``); other templates are not rendered here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_tablestore.client.epoch import datetime_to_ns, parse_epoch_ns
from airflow_tablestore.hooks.base import CONN_TYPE, DEFAULT_CONN_ID

PACKAGE = "airflow_tablestore"
_PARAM = re.compile(r"^\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
ACTIVE_TASK_STATES = ("running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule")


@dataclass(frozen=True, order=True)
class Binding:
    """A DAG task that uses a tunnel; ``consumes`` when it reads the tunnel (Spark consumer, consume operator)."""

    conn_id: str
    table: str
    tunnel: str
    dag_id: str
    task_id: str
    consumes: bool


@dataclass(frozen=True)
class RunPoint:
    """One finished run of a DAG that consumes a tunnel, from its times and its consumer tasks' summaries."""

    run_id: str
    state: str
    start: datetime | None
    end: datetime | None
    records: int | None  # summed over the run's consumer summaries; None when none recorded
    consume_point_ns: int | None  # the latest consume point the summaries report

    @property
    def duration_s(self) -> float | None:
        return (self.end - self.start).total_seconds() if self.start and self.end else None

    @property
    def lag_s(self) -> float | None:
        """The lag at run end: the run's end minus the consume point its consumers reported."""
        if self.end is None or not self.consume_point_ns:
            return None
        return max(0.0, (datetime_to_ns(self.end) - self.consume_point_ns) / 1e9)


def _resolve(value: Any, params: dict[str, Any]) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    match = _PARAM.match(value.strip())
    if match:
        resolved = params.get(match.group(1))
        return resolved if isinstance(resolved, str) and resolved else None
    return None if "{{" in value or "{%" in value else value


def _argument(args: Any, flag: str) -> Any:
    if isinstance(args, list | tuple):
        for i, arg in enumerate(args[:-1]):
            if arg == flag:
                return args[i + 1]
    return None


def _param_defaults(dag: Any) -> dict[str, Any]:
    try:
        return dict(dag.params.dump())
    except Exception:  # noqa: BLE001 - a parameter without a default: no substitution for it
        return {}


def bindings_of(dag: Any) -> list[Binding]:
    """The tunnel bindings of a (serialized) DAG's tasks."""
    params = _param_defaults(dag)
    found = []
    for task in dag.tasks:
        if not str(getattr(task, "_task_module", "") or "").startswith(PACKAGE):
            continue
        args = getattr(task, "application_args", None)
        consumes = args is not None or type(task).__name__ == "TablestoreTunnelConsumeOperator" \
            or getattr(task, "task_type", "") == "TablestoreTunnelConsumeOperator"
        table = _resolve(getattr(task, "table_name", None) or _argument(args, "--table"), params)
        tunnel = _resolve(getattr(task, "tunnel_name", None) or _argument(args, "--tunnel"), params)
        conn_id = _resolve(getattr(task, "tablestore_conn_id", None) or DEFAULT_CONN_ID, params)
        if table and tunnel and conn_id:
            found.append(Binding(conn_id, table, tunnel, dag.dag_id, task.task_id, consumes))
    return found


_BINDINGS: dict[tuple[str, str], tuple[Binding, ...]] = {}  # per DAG version: deserializing is the slow part
_BINDINGS_KEPT = 1024


def _cached_bindings(dag_id: str, dag_hash: str, data: Any) -> tuple[Binding, ...]:
    from airflow.serialization.serialized_objects import DagSerialization

    key = (dag_id, dag_hash)
    if key not in _BINDINGS:
        if len(_BINDINGS) >= _BINDINGS_KEPT:
            _BINDINGS.clear()
        _BINDINGS[key] = tuple(bindings_of(DagSerialization.from_dict(data)))
    return _BINDINGS[key]


def tunnel_bindings(session: Session, dag_ids: Iterable[str]) -> list[Binding]:
    """The bindings of the given DAGs' latest serialized versions (DAGs with no task of this package skipped
    before deserializing; results cached per DAG version)."""
    from airflow.models.dag import DagModel
    from airflow.models.serialized_dag import SerializedDagModel

    active = session.scalars(select(DagModel.dag_id).where(DagModel.dag_id.in_(list(dag_ids)),
                                                           DagModel.is_stale.is_(False))).all()
    found: list[Binding] = []
    for row in SerializedDagModel.get_latest_serialized_dags(dag_ids=list(active), session=session):
        if (row.dag_id, row.dag_hash) in _BINDINGS or PACKAGE in json.dumps(row.data):  # data: decompressed
            found.extend(_cached_bindings(row.dag_id, row.dag_hash, row.data))
    return sorted(found)


def env_connection_ids() -> list[str]:
    """``tablestore`` connections defined in ``AIRFLOW_CONN_*`` variables (URI or JSON form)."""
    found = []
    for name, value in os.environ.items():
        if not name.startswith("AIRFLOW_CONN_"):
            continue
        text = value.strip()
        kind = ""
        if text.startswith("{"):
            try:
                kind = str(json.loads(text).get("conn_type", ""))
            except (ValueError, AttributeError):
                continue
        else:
            kind = text.split("://", 1)[0] if "://" in text else ""
        if kind == CONN_TYPE:
            found.append(name[len("AIRFLOW_CONN_"):].lower())
    return sorted(found)


def connection_ids(session: Session) -> list[str]:
    """The ``tablestore`` connections of the metadata database and of the environment."""
    from airflow.models.connection import Connection

    stored = session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)).all()
    return sorted({*stored, *env_connection_ids()})


def active_consumers(session: Session, bindings: Iterable[Binding]) -> set[str]:
    """The DAG ids among ``bindings``' DAGs with a task that uses a tunnel running (or about to) now."""
    from airflow.models.taskinstance import TaskInstance

    pairs = {(b.dag_id, b.task_id) for b in bindings}
    if not pairs:
        return set()
    rows = session.execute(select(TaskInstance.dag_id, TaskInstance.task_id).where(
        TaskInstance.dag_id.in_({d for d, _ in pairs}), TaskInstance.state.in_(ACTIVE_TASK_STATES))).all()
    return {dag_id for dag_id, task_id in rows if (dag_id, task_id) in pairs}


def _summary(value: Any) -> tuple[int, int] | None:
    """(records, consume point ns) of a consumer's XCom summary (Spark consumer or consume operator)."""
    if not isinstance(value, dict) or "records" not in value:
        return None
    try:
        records = int(value["records"])
    except (TypeError, ValueError):
        return None
    point = value.get("consume_point")
    try:
        point_ns = parse_epoch_ns(point) if point not in (None, "", "none") else 0
    except Exception:  # noqa: BLE001 - a malformed point: the records still count
        point_ns = 0
    return records, point_ns


def run_history(session: Session, dag_id: str, consumer_tasks: Iterable[str], limit: int = 20) -> list[RunPoint]:
    """The last ``limit`` finished runs of ``dag_id``, oldest first, with what their consumer tasks recorded."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel

    runs = session.execute(
        select(DagRun.id, DagRun.run_id, DagRun._state, DagRun.start_date, DagRun.end_date)
        .where(DagRun.dag_id == dag_id, DagRun.end_date.is_not(None))
        .order_by(DagRun.end_date.desc()).limit(limit)).all()
    tasks = list(consumer_tasks)
    xcoms: dict[int, list[Any]] = {}
    if runs and tasks:
        for run_key, value in session.execute(
                select(XComModel.dag_run_id, XComModel.value).where(
                    XComModel.dag_run_id.in_([r.id for r in runs]), XComModel.key == "return_value",
                    XComModel.task_id.in_(tasks))).all():
            xcoms.setdefault(run_key, []).append(XComModel.deserialize_value(_Row(value)))
    points = []
    for run in reversed(runs):
        summaries = [s for s in map(_summary, xcoms.get(run.id, [])) if s is not None]
        records = sum(s[0] for s in summaries) if summaries else None
        consume = max((s[1] for s in summaries), default=0) or None
        points.append(RunPoint(run.run_id, str(run._state), run.start_date, run.end_date, records, consume))
    return points


class _Row:
    """What ``XComModel.deserialize_value`` reads from a result row."""

    def __init__(self, value: Any) -> None:
        self.value = value
