"""The consume-point verdict the tunnel hook, sensor, trigger and consume operator report, and the text of
tunnels that never will.

The rule itself ("is this tunnel consumed through the cutoff?") is
:func:`airflow_tablestore.client.tunnel.cutoff.consumed_through`; this module turns it into a reportable result
(event payload, messages) and refuses expired tunnels. Airflow-free, so the hooks and the triggers share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.epoch import ns_to_iso
from airflow_tablestore.client.errors import TablestoreError, TunnelExpiredError
from airflow_tablestore.client.model import TunnelDescription, TunnelType
from airflow_tablestore.client.tunnel.cutoff import consumed_through


@dataclass(frozen=True)
class ConsumePointCheck:
    """Outcome of one consume-point check; ``consume_point_ns`` is the tunnel consume point (0 = none)."""

    done: bool
    consume_point_ns: int
    tunnel_id: str
    tunnel_type: str
    message: str

    def as_event(self) -> dict[str, Any]:
        """JSON-serialisable form (trigger events, XCom)."""
        return {
            "tunnel_id": self.tunnel_id,
            "tunnel_type": self.tunnel_type,
            "consume_point_ns": self.consume_point_ns,
            "consume_point": ns_to_iso(self.consume_point_ns),
            "message": self.message,
        }


def evaluate_consume_point(description: TunnelDescription, cutoff_ns: int) -> ConsumePointCheck:
    """Decide whether a tunnel has been consumed up to ``cutoff_ns``. Raises :class:`TunnelExpiredError` for
    an expired tunnel (it will never progress)."""
    info = description.tunnel
    if info.expired:
        raise TunnelExpiredError(
            "OTSTunnelExpired",
            f"tunnel {info.tunnel_name!r} on table {info.table_name!r} has expired (its stream position fell "
            "out of the stream log retention): delete and recreate it, then reload the data",
        )
    progress = consumed_through(description, cutoff_ns)
    kind = TunnelType(info.tunnel_type)
    message = progress.message
    if progress.done and info.create_time_ns > cutoff_ns > 0:
        # a channel's consume point starts where the tunnel started: a tunnel newer than the cutoff is "through
        # the cutoff" before anything was read; say so, it surprises users of a default (interval end) cutoff
        message = (f"tunnel created at {ns_to_iso(info.create_time_ns)}, after the cutoff "
                   f"{ns_to_iso(cutoff_ns)}: nothing before the cutoff to wait for ({message})")
    return ConsumePointCheck(progress.done, progress.consume_point_ns, info.tunnel_id, kind.value, message)


def tunnel_problem_message(err: TablestoreError, table_name: str, tunnel_name: str) -> str:
    """Actionable text for a tunnel that is missing or expired (no retry will fix either)."""
    if isinstance(err, TunnelExpiredError):
        return str(err)
    return (
        f"tunnel {tunnel_name!r} on table {table_name!r} does not exist ({err}): create it first "
        "(TablestoreCreateTunnelOperator) or fix the table/tunnel name"
    )
