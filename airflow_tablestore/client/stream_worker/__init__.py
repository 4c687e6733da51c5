"""The stream worker: lease-based consumption of a table's Stream API (the model of Amazon's KCL).

    from airflow_tablestore.client.stream_worker import StreamWorker, StreamWorkerConfig, CallbackRecordProcessor

    worker = StreamWorker(table_client, "orders", lambda shard: CallbackRecordProcessor(handle))
    worker.run()          # or worker.start() ... worker.shutdown()
"""

from airflow_tablestore.client.stream_worker.config import DEFAULT_STATUS_TABLE, StreamWorkerConfig
from airflow_tablestore.client.stream_worker.lease import (
    SHARD_END,
    STATUS_SCHEMA_ERROR,
    STATUS_TYPE,
    TRIM_HORIZON,
    Lease,
    LeaseLostError,
    LeaseManager,
)
from airflow_tablestore.client.stream_worker.metrics import StreamMetricsSnapshot
from airflow_tablestore.client.stream_worker.processor import (
    CallbackRecordProcessor,
    Checkpointer,
    ProcessorFactory,
    RecordProcessor,
    ShardInfo,
    ShutdownReason,
)
from airflow_tablestore.client.stream_worker.worker import STREAM_NOT_FOUND, StreamWorker, StreamWorkerError

__all__ = [
    "DEFAULT_STATUS_TABLE",
    "SHARD_END",
    "STATUS_SCHEMA_ERROR",
    "STATUS_TYPE",
    "STREAM_NOT_FOUND",
    "TRIM_HORIZON",
    "CallbackRecordProcessor",
    "Checkpointer",
    "Lease",
    "LeaseLostError",
    "LeaseManager",
    "ProcessorFactory",
    "RecordProcessor",
    "ShardInfo",
    "ShutdownReason",
    "StreamMetricsSnapshot",
    "StreamWorker",
    "StreamWorkerConfig",
    "StreamWorkerError",
]
