"""``TablestoreSparkSubmitOperator``: ``spark-submit`` of the tunnel consumer, credentials in a private file.

The consumer is :mod:`airflow_tablestore.spark.consumer` (:data:`CONSUMER_APPLICATION` is the path of its
launcher, the ``application`` to submit; :func:`consumer_arguments` builds its ``application_args``). The
operator adds what a plain ``SparkSubmitOperator`` lacks for it: the Spark connection id may come from a param
(templated), the source and sink Tablestore connections reach the driver as a ``--credentials-file`` (never
argv, Spark conf or env_vars), the consumer's summary becomes the task's XCom, and it fails at once, without
retries, when the worker has no ``spark-submit`` or Java, or when the consumer exits with a permanent error.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any, NoReturn

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import XComArg

from airflow_tablestore.spark.consumer.job import application_path, log4j_config_path

CONSUMER_APPLICATION = application_path()
"""Path of the consumer job's launcher (the ``application`` argument of ``spark-submit``)."""
CONSUMER_LOG4J_CONFIG = log4j_config_path()
"""The packaged log4j2 configuration that keeps Spark at WARN in the task log (about 80 start-up INFO lines
otherwise): ``conf={"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file://{...}"}``."""


def consumer_arguments(*, table: str, tunnel: str | XComArg, phase: str, sink: str, sink_table: str | None = None,
                       sink_path: str | XComArg | None = None, records_per_channel: int | str | None = None,
                       heartbeat_interval: float | str | None = None, partition_by: str | None = None,
                       cutoff: str | None = None, purge_tombstones_after: float | str | None = None) -> list[str]:
    """The consumer's command line (``application_args``); templates are welcome (an ``XComArg`` such as
    ``task.output["tunnel"]`` becomes its template), None leaves an option out.

    :param table: the source table (``--table``).
    :param tunnel: the tunnel to consume (``--tunnel``).
    :param phase: ``full`` or ``incremental`` (``--phase``).
    :param sink: ``tablestore`` or ``parquet`` (``--sink``).
    :param sink_table: the destination table of the Tablestore sink (``--sink-table``).
    :param sink_path: the change log's root of the Parquet sink (``--sink-path``).
    :param records_per_channel: records after which a Spark task stops reading a channel in a round,
        rounded up to whole ReadRecords answers.
    :param heartbeat_interval: seconds between the consumer's tunnel heartbeats.
    :param partition_by: the change log's partitioning: ``none``, ``hour`` or ``day``.
    :param cutoff: where the incremental phase stops (ISO-8601; last on the command line).
    :param purge_tombstones_after: after the run, delete the Tablestore sink's tombstones older than this many
        seconds (at least the stale-write horizon the consumer computes from its timeouts; see docs/spark.md).
    """
    options = [("--table", table), ("--tunnel", tunnel), ("--phase", phase), ("--sink", sink),
               ("--sink-table", sink_table), ("--sink-path", sink_path),
               ("--records-per-channel", records_per_channel), ("--heartbeat-interval", heartbeat_interval),
               ("--partition-by", partition_by), ("--purge-tombstones-after", purge_tombstones_after),
               ("--cutoff", cutoff)]
    return [part for flag, value in options if value is not None for part in (flag, str(value))]


UNSET = ("", "None")
"""What a template renders for a parameter that is not set (``{{ params.x }}`` of None is ``"None"``)."""


def without_unset_options(args: list[Any] | None) -> list[Any] | None:
    """``args`` without the ``--option value`` pairs whose rendered value is unset (:data:`UNSET`), so that no
    ``None`` reaches a command line (the Tablestore sink's ``--sink-path {{ params.parquet_path }}``)."""
    if not args:
        return args
    kept: list[Any] = []
    i = 0
    while i < len(args):
        item = args[i]
        if isinstance(item, str) and item.startswith("--") and i + 1 < len(args) and str(args[i + 1]) in UNSET:
            i += 2
            continue
        kept.append(item)
        i += 1
    return kept


def consumer_argument_problem(args: list[Any] | None) -> str | None:
    """What the consumer would refuse in its (rendered) ``args``, in one line, or None: its own parser and
    checks, run before ``spark-submit`` starts (a value out of range is refused, never changed)."""
    from airflow_tablestore.spark.consumer.options import OptionsError, build_parser, parse_args

    def refuse(message: str) -> NoReturn:
        raise OptionsError(message)

    argv = [str(arg) for arg in args or []]
    parser = build_parser()
    parser.error = refuse  # type: ignore[method-assign]  # raise instead of printing the usage and exiting
    try:
        parser.parse_args(argv)
        parse_args(argv)  # the checks across options
    except OptionsError as err:
        return str(err)
    except SystemExit:  # -h/--help (argparse prints and exits): never end the task from here
        return "the consumer's arguments hold -h/--help: it would print its usage instead of running"
    return None


class TablestoreSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` for the consumer: the Spark connection id can come from a param (templated); it
    fails at once, without retries, when the worker has no ``spark-submit`` or no Java, or when the consumer
    exits with a permanent error; and credentials never appear on a command line.

    Credentials: the source and sink connections are written to a JSON file readable only by the worker's user
    (in a private temporary directory, deleted when the task ends) and passed as ``--credentials-file``. In
    client and local mode the driver reads it where it is; in cluster deploy mode it travels with ``--files``
    and the driver reads it from its working directory (on Kubernetes that needs
    ``spark.kubernetes.file.upload.path``; or mount a Secret and pass ``--credentials-file`` in
    ``application_args`` yourself). The executors receive the settings inside the job's closures, never
    through the Spark conf.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "_conn_id", "tablestore_conn_id",
                       "sink_tablestore_conn_id")

    def __init__(self, *, tablestore_conn_id: str, sink_tablestore_conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tablestore_conn_id = tablestore_conn_id
        self.sink_tablestore_conn_id = sink_tablestore_conn_id

    def _with_credentials(self, directory: str) -> None:
        """Write the credentials file into ``directory`` and point the job at it."""
        from airflow_tablestore.client.credentials import write_credentials_file
        from airflow_tablestore.hooks.table import TablestoreHook

        source = TablestoreHook(self.tablestore_conn_id).get_config()  # registers secrets with the masker
        sink = None
        if self.sink_tablestore_conn_id and self.sink_tablestore_conn_id != self.tablestore_conn_id:
            sink = TablestoreHook(self.sink_tablestore_conn_id).get_config()
        path = write_credentials_file(directory, source, sink)
        if (self._deploy_mode or self._get_hook()._connection.get("deploy_mode")) == "cluster":
            self.files = ",".join(filter(None, [self.files, str(path)]))
            self.application_args = [*(self.application_args or []), "--credentials-file", path.name]
        else:
            self.application_args = [*(self.application_args or []), "--credentials-file", str(path)]

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Lineage of a consumer run, from its command line: the source table (``--table``) as input, the
        replica (``--sink tablestore --sink-table``) or the change log (``--sink parquet --sink-path``) as
        output, named ``tablestore://<instance>/<table>``; None without the OpenLineage provider or a
        ``--table``."""
        from airflow_tablestore.hooks.table import TablestoreHook
        from airflow_tablestore.operators._lineage import option_value, table_lineage

        args = self.application_args
        table = option_value(args, "--table")
        if table is None:
            return None
        source = TablestoreHook(self.tablestore_conn_id).get_config().instance_name
        outputs: list[tuple[str, str]] = []
        paths: list[str] = []
        sink_table, sink_path = option_value(args, "--sink-table"), option_value(args, "--sink-path")
        if option_value(args, "--sink") == "tablestore" and sink_table:
            sink_conn = self.sink_tablestore_conn_id or self.tablestore_conn_id
            outputs.append((TablestoreHook(sink_conn).get_config().instance_name, sink_table))
        elif option_value(args, "--sink") == "parquet" and sink_path:
            paths.append(sink_path)
        return table_lineage(inputs=[(source, table)], outputs=outputs, path_outputs=paths)

    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        """Run the consumer; returns its summary (records, consume point, ...) as the task's XCom, or None
        when the driver ran elsewhere (cluster deploy mode)."""
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_tablestore.operators.failures import fail_fast
        from airflow_tablestore.spark.consumer.job import PERMANENT_EXIT_CODES
        from airflow_tablestore.spark.consumer.preflight import spark_submit_problem

        try:  # the binary the hook will run (operator argument, else the connection's spark-binary extra)
            binary = self._get_hook()._connection["spark_binary"]
        except Exception:
            binary = getattr(self, "_spark_binary", None) or "spark-submit"
        problem = spark_submit_problem(binary)
        if problem:
            raise AirflowFailException(problem)
        self.application_args = without_unset_options(self.application_args)
        if self.application == CONSUMER_APPLICATION:  # a wrong argument fails now, not after spark-submit started
            problem = consumer_argument_problem(self.application_args)
            if problem:
                raise AirflowFailException(f"application_args: the consumer refuses them: {problem} (not retried: "
                                           "retrying cannot fix this)")
        try:
            with tempfile.TemporaryDirectory(prefix="tablestore-spark-") as private:  # mode 0700
                with fail_fast():  # a malformed Tablestore connection will not improve with retries
                    self._with_credentials(private)
                summary = os.path.join(private, "summary.json")
                if (self._deploy_mode or self._get_hook()._connection.get("deploy_mode")) != "cluster":
                    self.application_args = [*(self.application_args or []), "--summary-file", summary]
                super().execute(context)
                return _read_summary(summary)
        except Exception as exc:
            code = re.search(r"Error code is: (\d+)", str(exc))
            if code and int(code.group(1)) in PERMANENT_EXIT_CODES:
                raise AirflowFailException(
                    f"the consumer stopped with a permanent error (exit code {code.group(1)}; its ERROR line "
                    "above says which): not retried, retrying cannot fix it") from exc
            raise


def _read_summary(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as summary:
            return dict(json.load(summary))
    except (OSError, ValueError):
        return None
