"""The tunnel worker: consume a whole tunnel (all channels, both phases) with your processor.

    from airflow_tablestore.client.tunnel_worker import TunnelWorker, TunnelWorkerConfig, CallbackProcessor

    worker = TunnelWorker(tunnel_client, tunnel_id, CallbackProcessor(handle_batch))
    worker.run()          # or worker.start() ... worker.shutdown()
"""

from airflow_tablestore.client.tunnel_worker.config import Backoff, TunnelWorkerConfig
from airflow_tablestore.client.tunnel_worker.metrics import MetricsSnapshot
from airflow_tablestore.client.tunnel_worker.processor import (
    CallbackProcessor,
    ChannelContext,
    ChannelProcessor,
    ProcessorFactory,
)
from airflow_tablestore.client.tunnel_worker.worker import FATAL_CODES, TunnelWorker, TunnelWorkerError

__all__ = [
    "FATAL_CODES",
    "Backoff",
    "CallbackProcessor",
    "ChannelContext",
    "ChannelProcessor",
    "MetricsSnapshot",
    "ProcessorFactory",
    "TunnelWorker",
    "TunnelWorkerConfig",
    "TunnelWorkerError",
]
