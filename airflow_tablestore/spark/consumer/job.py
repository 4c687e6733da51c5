"""``spark-submit`` application: consume a Tablestore tunnel into a Tablestore table or a Parquet change log.

The application file ``spark-submit`` runs is the launcher
``airflow_tablestore/spark/consumer/application/tablestore_consumer.py``, which calls :func:`main`
(``python -c "import airflow_tablestore.spark.consumer.job as m; print(m.application_path())"`` prints its path)::

    spark-submit --master local[2] .../airflow_tablestore/spark/consumer/application/tablestore_consumer.py \\
        --table src --tunnel t --phase incremental --cutoff 2026-11-21T12:00:00Z \\
        --sink tablestore --sink-table dst

``python -m airflow_tablestore.spark.consumer ARGS`` runs it too (without Spark's launcher).

Credentials: ``TABLESTORE_ENDPOINT``, ``TABLESTORE_INSTANCE``, ``TABLESTORE_ACCESS_KEY_ID``,
``TABLESTORE_ACCESS_KEY_SECRET`` [, ``TABLESTORE_STS_TOKEN``] (and ``TABLESTORE_SINK_*`` for a sink on another
instance) or ``--credentials-file``. Exit codes: 0 done, 1 failure worth a retry (message in the log), 2 bad
arguments, 3 a permanent error no retry can fix (credentials, missing table or tunnel, expired tunnel, bad
settings, a sink that is the source), 143 terminated by SIGTERM (the tunnel client is shut down cleanly
first).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

# A fixed name, not __name__: run as ``python -m airflow_tablestore.spark.consumer`` this module is ``__main__``.
log = logging.getLogger("airflow_tablestore.spark")


EXIT_RETRYABLE = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_PERMANENT = 3
PERMANENT_EXIT_CODES = (EXIT_BAD_ARGUMENTS, EXIT_PERMANENT)
"""Exit codes after which running the job again cannot succeed (the Airflow task fails without retries)."""


class Terminated(SystemExit):
    """Raised in the driver's main thread on SIGTERM so ``finally`` blocks shut the tunnel client down."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated(143)


def application_path() -> str:
    """Filesystem path of the launcher, the ``application`` of ``spark-submit`` (``SparkSubmitOperator``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "application", "tablestore_consumer.py")


def log4j_config_path() -> str:
    """Path of the packaged log4j2 configuration (Spark at WARN) for ``-Dlog4j2.configurationFile``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def build_sink(options: Any, source: Any) -> Any:
    """The sink described by the options (sink credentials default to the source instance)."""
    from airflow_tablestore.client import credentials as settings_mod
    from airflow_tablestore.spark.sinks.parquet import ParquetSink
    from airflow_tablestore.spark.sinks.tablestore import TablestoreSink

    if options.sink == "parquet":
        return ParquetSink(options.sink_path, options.partition_by)
    sink_settings = settings_mod.load(
        credentials_file=options.credentials_file, section="sink", env_prefix=options.sink_env_prefix,
        fallback=source,
    )
    if options.sink_table == options.table and settings_mod.same_instance(sink_settings, source):
        from airflow_tablestore.spark.consumer.outcome import ConfigurationError

        raise ConfigurationError(
            f"the sink is the source table itself ({options.table} on instance {source.instance_name} at "
            f"{source.endpoint}): writing there would feed its own stream; set --sink-table or the sink "
            "instance's settings (TABLESTORE_SINK_* or the credentials file's 'sink' object)"
        )
    return TablestoreSink(sink_settings, options.sink_table, options.request_timeout, options.fence_column)


def purge_sink_tombstones(options: Any, sink: Any) -> None:
    """``--purge-tombstones-after``: delete the sink table's tombstones older than the horizon
    (:mod:`~airflow_tablestore.spark.sinks.purge`), logged as a ``TOMBSTONE_PURGE {json}`` line."""
    from airflow_tablestore.spark.sinks.purge import purge_tombstones

    client = sink.settings.table_client(timeout=options.request_timeout)
    try:
        result = purge_tombstones(client, sink.table, sink.fence_column, options.purge_tombstones_after)
    finally:
        client.close()
    print("TOMBSTONE_PURGE " + json.dumps(result.as_dict(), sort_keys=True), flush=True)


def default_spark_factory(options: Any) -> Any:
    """A ``SparkSession`` for the job (master and resources come from spark-submit)."""

    def factory() -> Any:
        from pyspark.sql import SparkSession

        from airflow_tablestore.spark.consumer.outcome import ConfigurationError
        from airflow_tablestore.spark.install_check import jvm_side_problem, python_side_problem

        problem = python_side_problem()
        if problem:
            raise ConfigurationError(f"inconsistent PySpark install: {problem}")
        # Python workers must have this package and pyarrow: default to the driver's interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        app_name = options.app_name or f"tablestore-{options.tunnel}-{options.phase}"
        builder = SparkSession.builder.appName(app_name)
        builder = builder.config("spark.speculation", "false")  # a tunnel read must run once per round
        builder = builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("TABLESTORE_SPARK_LOG_LEVEL", "WARN"))
        problem = jvm_side_problem(spark)
        if problem:
            spark.stop()
            raise ConfigurationError(f"inconsistent PySpark install: {problem}")
        log.info("spark %s, master %s", spark.version, spark.sparkContext.master)
        return spark

    return factory


def write_summary(path: str, line: str) -> None:
    """Write the summary JSON to ``path`` (for the Airflow task; a failure to do so only logs a warning)."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError as exc:
        log.warning("could not write the summary to %s: %s", path, exc)


def run(argv: Sequence[str] | None = None, spark_factory: Any = None) -> int:
    """Parse, run one phase, log a ``CONSUMER_SUMMARY {json}`` line; returns the exit code."""
    from airflow_tablestore.client import credentials as settings_mod
    from airflow_tablestore.client.errors import PERMANENT_ERRORS, TablestoreError, TunnelExpiredError
    from airflow_tablestore.client.settings import SettingsError
    from airflow_tablestore.spark.consumer.driver import ConsumerJob
    from airflow_tablestore.spark.consumer.options import OptionsError, parse_args
    from airflow_tablestore.spark.consumer.outcome import ConfigurationError, JobError, expired_message

    try:
        options = parse_args(argv)
    except OptionsError as exc:
        log.error("%s", exc)
        return EXIT_BAD_ARGUMENTS
    spark_holder: list[Any] = []
    job = None
    permanent: tuple[type[Exception], ...] = (*PERMANENT_ERRORS, SettingsError)
    try:
        source = settings_mod.load(credentials_file=options.credentials_file, section="source",
                                   env_prefix=settings_mod.SOURCE_PREFIX)
        try:
            options = options.with_connection(source)
        except OptionsError as exc:
            log.error("%s", exc)
            return EXIT_BAD_ARGUMENTS
        sink = build_sink(options, source)
        factory = spark_factory or default_spark_factory(options)

        def tracked_factory() -> Any:
            spark_holder.append(factory())
            return spark_holder[-1]

        job = ConsumerJob(options, source, sink, tracked_factory)
        summary = job.run()
        if options.purge_tombstones_after is not None:
            purge_sink_tombstones(options, sink)
        line = json.dumps(summary.as_dict(), sort_keys=True)
        print("CONSUMER_SUMMARY " + line, flush=True)
        if options.summary_file:
            write_summary(options.summary_file, line)
        return 0
    except ConfigurationError as exc:
        log.error("%s", exc)
        return EXIT_PERMANENT
    except JobError as exc:
        log.error("%s", exc)
        return EXIT_RETRYABLE
    except TunnelExpiredError as exc:
        log.error("%s", expired_message(exc))
        return EXIT_PERMANENT
    except permanent as exc:
        log.error("Tablestore error (permanent, not worth a retry): %s", exc)
        return EXIT_PERMANENT
    except TablestoreError as exc:
        log.error("Tablestore error: %s", exc)
        return EXIT_RETRYABLE
    except Terminated:
        log.warning("terminated by SIGTERM: tunnel client shut down, nothing checkpointed past the sink")
        return 143
    except Exception as exc:  # Spark task failures surface as Py4J/AnalysisExceptions; keep the message
        log.error("consumer failed: %s: %s", type(exc).__name__, str(exc)[-4000:])
        return EXIT_RETRYABLE
    finally:
        if job is not None:
            job.close()
        if spark_factory is None:
            for spark in spark_holder:
                with contextlib.suppress(Exception):  # best effort on the way out
                    spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``spark-submit`` of :func:`application_path` (the launcher calls this), or
    ``python -m airflow_tablestore.spark.consumer``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)

