"""Channel-state bookkeeping of the heartbeat protocol (moved to :mod:`airflow_tablestore.client.tunnel_session`,
the core the TunnelWorker and the Spark driver share; these names stay importable from here)."""

from airflow_tablestore.client.tunnel_session import merge_channels, transition

__all__ = ["merge_channels", "transition"]
