"""When a phase is complete, from a ``DescribeTunnel`` answer (no Spark, no pyarrow: the DAG uses it too).

Thin names over the one rule in :mod:`airflow_tablestore.client.progress`, which the sensor uses as well.
"""

from __future__ import annotations

from airflow_tablestore.client.model import TunnelDescription
from airflow_tablestore.client.progress import BASE, STREAM, consumed_through, full_phase_done

__all__ = ["BASE", "STREAM", "full_phase_done", "incremental_done"]


def incremental_done(desc: TunnelDescription, cutoff_ns: int) -> bool:
    """True when the tunnel is consumed through ``cutoff_ns`` (:func:`consumed_through`)."""
    return consumed_through(desc, cutoff_ns).done
