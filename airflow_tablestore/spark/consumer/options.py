"""Command-line options of the consumer job (no secrets here: the settings come from
:mod:`airflow_tablestore.client.credentials`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from airflow_tablestore.client.credentials import SINK_PREFIX
from airflow_tablestore.client.epoch import EPOCH, TimeArgumentError, parse_time_argument, to_ns
from airflow_tablestore.client.replica import FENCE_COLUMN
from airflow_tablestore.client.settings import ConnectionSettings

DEFAULT_REQUEST_TIMEOUT_S = 60.0
PHASES = ("full", "incremental")
SINKS = ("tablestore", "parquet")


class OptionsError(ValueError):
    """Invalid command-line options (exit code 2)."""


@dataclass(frozen=True)
class JobOptions:
    """Everything the driver needs besides credentials."""

    table: str
    tunnel: str
    phase: str
    sink: str
    cutoff: datetime | None = None
    sink_table: str | None = None
    sink_path: str | None = None
    sink_env_prefix: str = SINK_PREFIX
    fence_column: str = FENCE_COLUMN
    partition_by: str = "none"
    summary_file: str | None = None
    credentials_file: str | None = None
    records_per_channel: int = 50_000
    bytes_per_channel: int = 256 * 1024 * 1024
    max_parallel_channels: int = 0
    tasks_per_round: int = 0
    heartbeat_interval: float = 5.0
    client_timeout: int = 60
    idle_wait: float = 1.0
    max_rounds: int = 0
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    request_timeout_given: bool = False
    """Whether ``--request-timeout`` was given; if not, the connection's read timeout (when it has one) is the
    request timeout (:meth:`with_connection`)."""
    app_name: str | None = None
    purge_tombstones_after: float | None = None

    def with_connection(self, settings: ConnectionSettings) -> JobOptions:
        """These options with the connection's read timeout as the request timeout when ``--request-timeout``
        was not given, re-checked (the tombstone horizon depends on it)."""
        if self.request_timeout_given or settings.read_timeout is None:
            return self
        options = dataclasses.replace(self, request_timeout=settings.read_timeout)
        if options.purge_tombstones_after is not None:
            check_purge(options)
        return options

    @property
    def cutoff_us(self) -> int | None:
        """The cutoff in microseconds since epoch (the unit of stream sequence timestamps)."""
        if self.cutoff is None:
            return None
        return to_ns(self.cutoff) // 1_000  # exact: a datetime has microsecond precision


def parse_cutoff(text: str) -> datetime:
    """The cutoff as an aware UTC datetime: an ISO-8601 time (naive = UTC, a trailing ``Z`` too) or an epoch
    number; an :class:`OptionsError` in the form of every time argument's error otherwise."""
    try:
        return EPOCH + timedelta(microseconds=parse_time_argument("--cutoff", text) // 1_000)
    except TimeArgumentError as err:
        raise OptionsError(str(err)) from None


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="airflow_tablestore.spark.consumer",
        description="Consume a Tablestore tunnel with Spark into a Tablestore table or a Parquet change log. "
        "Credentials come from TABLESTORE_* (and TABLESTORE_SINK_*) environment variables or "
        "--credentials-file, never from arguments.",
    )
    p.add_argument("--table", required=True, help="source table of the tunnel")
    p.add_argument("--tunnel", required=True, help="tunnel name")
    p.add_argument("--phase", required=True, choices=PHASES)
    p.add_argument("--cutoff", help="end of the incremental window, an ISO-8601 time or an epoch number (required "
                   "for --phase incremental)")
    p.add_argument("--sink", required=True, choices=SINKS)
    p.add_argument("--sink-table", help="destination table (--sink tablestore)")
    p.add_argument("--sink-path", help="change-log directory or URI (--sink parquet)")
    p.add_argument("--sink-conn-env-prefix", default=SINK_PREFIX,
                   help="environment prefix of the sink instance settings (default %(default)s; falls back "
                   "to the source instance when unset)")
    p.add_argument("--fence-column", default=FENCE_COLUMN,
                   help="column of the destination table holding each row's last applied stream position; "
                   "writes are conditional on it so late or replayed writes never roll a row back; '' turns the "
                   "fence off (--sink tablestore; default %(default)s)")
    p.add_argument("--partition-by", choices=("none", "hour", "day"), default="none",
                   help="partition the Parquet change log by each change's commit time: interval=YYYYMMDDTHH "
                   "(hour) or interval=YYYYMMDD (day), base data in interval=base (default %(default)s)")
    p.add_argument("--summary-file", help="also write the CONSUMER_SUMMARY JSON to this file (the DAG's tasks "
                   "return it as their XCom)")
    p.add_argument("--credentials-file", help="JSON file with 'source' and optional 'sink' settings")
    p.add_argument("--records-per-channel", type=_positive_int, default=50_000,
                   help="records after which a round stops reading a channel, rounded up to whole ReadRecords "
                   "answers (a checkpoint holds an answer's end; default %(default)s)")
    p.add_argument("--bytes-per-channel", type=_positive_int, default=256 * 1024 * 1024,
                   help="bytes (as read from the tunnel) per channel per round: with --records-per-channel, "
                   "bounds a task's work for large rows (default %(default)s = 256 MiB)")
    p.add_argument("--max-parallel-channels", type=_non_negative_int, default=0,
                   help="channels read per round, 0 = all open channels (default)")
    p.add_argument("--tasks-per-round", type=_non_negative_int, default=0,
                   help="Spark tasks a round's channels are split over, each task reading its channels one after "
                   "another; 0 = 4 per task slot (Spark's default parallelism, the executors' cores), never more "
                   "than the channels (default)")
    p.add_argument("--heartbeat-interval", type=_positive_float, default=5.0,
                   help="seconds between tunnel heartbeats (default %(default)s)")
    p.add_argument("--client-timeout", type=_positive_int, default=60,
                   help="server-side tunnel client timeout in seconds (default %(default)s)")
    p.add_argument("--idle-wait", type=_positive_float, default=1.0,
                   help="seconds to wait after a round that found nothing to do (default %(default)s)")
    p.add_argument("--max-rounds", type=_non_negative_int, default=0,
                   help="stop after this many rounds, 0 = until the phase is done (default)")
    p.add_argument("--request-timeout", type=_positive_float,
                   help="HTTP read timeout of one Tablestore request in seconds (default: the connection's "
                   f"read_timeout, else {DEFAULT_REQUEST_TIMEOUT_S:g})")
    p.add_argument("--app-name", help="Spark application name")
    p.add_argument("--purge-tombstones-after", type=_positive_float, metavar="SECONDS",
                   help="after the run, delete the sink table's tombstones (deleted rows kept for the fence) "
                   "written more than SECONDS ago; must be at least the horizon past which no late or stale "
                   "write can arrive, computed from --client-timeout, --heartbeat-interval, --request-timeout and "
                   "--records-per-channel (the error says how much; --sink tablestore with a fence only)")
    return p


def parse_args(argv: Sequence[str] | None = None) -> JobOptions:
    """Parse and cross-check the options; raises :class:`OptionsError` with an actionable message."""
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage and error (or the --help text)
        if exc.code == 0:
            raise
        raise OptionsError("invalid command-line arguments (see usage above)") from exc
    cutoff = parse_cutoff(ns.cutoff) if ns.cutoff else None
    if ns.phase == "incremental" and cutoff is None:
        raise OptionsError("--phase incremental needs --cutoff (e.g. the DAG's {{ data_interval_end }})")
    if ns.sink == "tablestore" and not ns.sink_table:
        raise OptionsError("--sink tablestore needs --sink-table")
    if ns.sink == "parquet" and not ns.sink_path:
        raise OptionsError("--sink parquet needs --sink-path")
    if ns.fence_column and (ns.fence_column.startswith(" ") or len(ns.fence_column) > 255):
        raise OptionsError(f"--fence-column {ns.fence_column!r} is not a valid column name")
    if ns.heartbeat_interval >= ns.client_timeout:
        raise OptionsError("--heartbeat-interval must be shorter than --client-timeout")
    options = JobOptions(
        table=ns.table,
        tunnel=ns.tunnel,
        phase=ns.phase,
        sink=ns.sink,
        cutoff=cutoff,
        sink_table=ns.sink_table,
        sink_path=ns.sink_path,
        sink_env_prefix=ns.sink_conn_env_prefix,
        fence_column=ns.fence_column,
        partition_by=ns.partition_by,
        summary_file=ns.summary_file,
        credentials_file=ns.credentials_file,
        records_per_channel=ns.records_per_channel,
        bytes_per_channel=ns.bytes_per_channel,
        max_parallel_channels=ns.max_parallel_channels,
        tasks_per_round=ns.tasks_per_round,
        heartbeat_interval=ns.heartbeat_interval,
        client_timeout=ns.client_timeout,
        idle_wait=ns.idle_wait,
        max_rounds=ns.max_rounds,
        request_timeout=ns.request_timeout or DEFAULT_REQUEST_TIMEOUT_S,
        request_timeout_given=ns.request_timeout is not None,
        app_name=ns.app_name,
        purge_tombstones_after=ns.purge_tombstones_after,
    )
    if options.purge_tombstones_after is not None:
        check_purge(options)
    return options


def check_purge(ns: JobOptions) -> None:
    """``--purge-tombstones-after`` needs a fenced Tablestore sink and at least the stale-write horizon."""
    from airflow_tablestore.spark.sinks.purge import minimum_horizon_s

    if ns.sink != "tablestore" or not ns.fence_column:
        raise OptionsError("--purge-tombstones-after needs --sink tablestore with a fence (tombstones exist only "
                           "there)")
    minimum = minimum_horizon_s(request_timeout=ns.request_timeout, client_timeout=ns.client_timeout,
                                heartbeat_interval=ns.heartbeat_interval,
                                records_per_channel=ns.records_per_channel)
    assert ns.purge_tombstones_after is not None
    if ns.purge_tombstones_after < minimum:
        raise OptionsError(f"--purge-tombstones-after {ns.purge_tombstones_after:g} is below {minimum:.0f}s, the "
                           "longest a stale write can still arrive with these --client-timeout, "
                           "--heartbeat-interval, --request-timeout and --records-per-channel: a younger "
                           "tombstone may still be needed to refuse it")
