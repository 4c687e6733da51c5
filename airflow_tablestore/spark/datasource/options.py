"""The options of the ``tablestore`` data source: parsed once, checked with one clear error each, picklable.

Connection, in this order: the options ``endpoint``, ``instance``, ``access_key_id``, ``access_key_secret``
[, ``sts_token``, ``region``, ``connect_timeout``, ``read_timeout``] when any of the first six is given (then all
four required ones must be); else the JSON file named by ``credentials_file`` (the consumer's format, section
``source``); else the environment variables ``TABLESTORE_ENDPOINT``, ``TABLESTORE_INSTANCE``,
``TABLESTORE_ACCESS_KEY_ID``, ``TABLESTORE_ACCESS_KEY_SECRET`` [, ``TABLESTORE_STS_TOKEN``,
``TABLESTORE_REGION``, ``TABLESTORE_CONNECT_TIMEOUT``, ``TABLESTORE_READ_TIMEOUT``], read where the data source is
created (the driver). All of them go through the one settings parser
(:func:`~airflow_tablestore.client.settings.parse_settings`): a bad one is a
:class:`~airflow_tablestore.client.settings.SettingsError` naming it. ``connect_timeout``/``read_timeout``
options override the file's or the variables' timeouts.
Spark redacts option keys matching ``spark.redaction.regex`` (``secret``, ``token``, ``password`` by default)
in plans and the UI; the parsed :class:`SourceOptions` never shows the secret in its repr or in an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tablestore.client import credentials as job_settings
from airflow_tablestore.client.epoch import parse_epoch_ns
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.model import TimeRange
from airflow_tablestore.client.replica import FENCE_COLUMN
from airflow_tablestore.client.settings import ConnectionSettings, SettingsError, parse_settings

MODES = ("PERMISSIVE", "FAILFAST")
ROW_CHANGES = ("put", "update")
_CONNECTION_KEYS = {
    "endpoint": "endpoint",
    "instance": "instance_name",
    "access_key_id": "access_key_id",
    "access_key_secret": "access_key_secret",
    "sts_token": "sts_token",
    "region": "region",
}
_TIMEOUT_KEYS = ("connect_timeout", "read_timeout")
_KNOWN = {
    *_CONNECTION_KEYS, *_TIMEOUT_KEYS, "credentials_file", "table", "columns", "max_versions", "time_range_start",
    "time_range_end", "split_size_mb", "max_split_count", "page_rows", "mode", "columnnameofcorruptrecord",
    "pushdown", "show_replication_columns", "fence_column", "row_change", "batch_rows", "fence_by", "path",
    "tunnel", "max_records_per_trigger", "max_records_per_channel", "positions_table", "heartbeat_interval",
    "client_timeout", "settle_ms", "channel_wait_s", "max_tasks_per_batch",
}


class OptionError(TablestoreClientError):
    """A data source option is missing or malformed (a configuration mistake: no retry can fix it)."""


def _flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key!r} must be true or false, got {raw!r}")


def _int(options: Mapping[str, str], key: str, default: int | None, minimum: int) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key!r} must be at least {minimum}, got {value}")
    return value


def _time_ms(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return None
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return int(text)  # a cell version: milliseconds since the epoch, as Tablestore counts them
    try:
        return parse_epoch_ns(text) // 1_000_000
    except TablestoreClientError:
        raise OptionError(f"option {key!r} must be milliseconds since the epoch or ISO-8601, got {raw!r}") from None


def connection_settings(options: Mapping[str, str]) -> ConnectionSettings:
    """The instance to talk to: connection options, else ``credentials_file``, else ``TABLESTORE_*``; the
    ``connect_timeout``/``read_timeout`` options apply to any of them."""
    timeouts = {key: options[key] for key in _TIMEOUT_KEYS if options.get(key)}
    if any(options.get(key) for key in _CONNECTION_KEYS):
        values = {name: options.get(key) for key, name in _CONNECTION_KEYS.items()} | timeouts
        return parse_settings(values, where="the data source options", labels={
            name: key for key, name in _CONNECTION_KEYS.items()} | {key: key for key in _TIMEOUT_KEYS},
            hint=": give all of endpoint, instance, access_key_id, access_key_secret (or none of them, and use "
                 "credentials_file or the TABLESTORE_* environment variables)")
    try:
        settings = job_settings.load(credentials_file=options.get("credentials_file") or None, section="source",
                                     env_prefix=job_settings.SOURCE_PREFIX)
    except SettingsError as exc:
        raise SettingsError(f"no Tablestore connection: {exc.message}; or give the options endpoint, instance, "
                            "access_key_id and access_key_secret") from None
    if not timeouts:
        return settings
    values = {name: getattr(settings, name) for name in (*_CONNECTION_KEYS.values(), *_TIMEOUT_KEYS)} | timeouts
    return parse_settings(values, where="the data source options", labels={key: key for key in _TIMEOUT_KEYS})


@dataclass(frozen=True)
class SourceOptions:
    """Every option of one ``spark.read``/``df.write`` of format ``tablestore``, parsed and checked."""

    settings: ConnectionSettings = field(repr=False)
    table: str
    columns: tuple[str, ...] | None = None
    max_versions: int | None = None
    """None: not given (1; a versioned user schema reads every version the table keeps)."""
    time_range: TimeRange | None = None
    split_size_mb: int = 100
    max_split_count: int = 1000
    page_rows: int = 5000
    mode: str = "PERMISSIVE"
    corrupt_record_column: str | None = None
    pushdown: bool = True
    show_replication_columns: bool = False
    fence_column: str = FENCE_COLUMN
    row_change: str = "put"
    batch_rows: int = 200
    fence_by: str | None = None
    tunnel: str | None = None
    """Streaming: the tunnel whose changes ``spark.readStream`` yields."""
    max_records_per_trigger: int | None = None
    """Streaming: Spark's default read limit (records per micro-batch, over all channels); None: all available."""
    max_records_per_channel: int = 100_000
    """Streaming: at most this many records of one channel in one micro-batch."""
    positions_table: str = "spark_tunnel_positions"
    """Streaming: the table where read tasks leave where their spans ended (created on first use)."""
    heartbeat_interval: float = 5.0
    client_timeout: int = 60
    settle_ms: int = 200
    """Streaming: a read task reads a span only once its time bound is this old (the log is complete up to
    then), so that a replayed batch yields the same records."""
    channel_wait_s: int = 300
    """Streaming: how long to wait for channels the query needs (held by a dead client until its timeout)."""
    max_tasks_per_batch: int = 32
    """Streaming: at most this many read tasks per micro-batch; the channels' spans are dealt to them (about 4
    per executor core: fewer tasks pay Spark's per-task cost less often, more spread uneven channels)."""

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SourceOptions:
        """Parse Spark's (case-insensitive) options; unknown keys are an error naming the known ones."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        unknown = sorted(set(lowered) - _KNOWN)
        if unknown:
            raise OptionError(f"unknown option(s) {', '.join(unknown)} for format 'tablestore'; known: "
                              f"{', '.join(sorted(_KNOWN - {'path'}))}")
        table = lowered.get("table") or lowered.get("path")
        if not table:
            raise OptionError("option 'table' is required: spark.read.format('tablestore').option('table', NAME)")
        columns = None
        if lowered.get("columns"):
            columns = tuple(c.strip() for c in str(lowered["columns"]).split(",") if c.strip())
        start, end = _time_ms(lowered, "time_range_start"), _time_ms(lowered, "time_range_end")
        if start is not None and end is not None and start >= end:
            raise OptionError(f"time_range_start ({start}) must be before time_range_end ({end})")
        time_range = TimeRange(start=start or 0, end=end if end is not None else 2**63 - 1) \
            if start is not None or end is not None else None
        mode = str(lowered.get("mode") or "PERMISSIVE").upper()
        if mode not in MODES:
            raise OptionError(f"option 'mode' must be one of {', '.join(MODES)}, got {lowered['mode']!r}")
        row_change = str(lowered.get("row_change") or "put").lower()
        if row_change not in ROW_CHANGES:
            raise OptionError(f"option 'row_change' must be put or update, got {lowered['row_change']!r}")
        batch_rows = _int(lowered, "batch_rows", 200, 1)
        if batch_rows is not None and batch_rows > 200:
            raise OptionError(f"option 'batch_rows' must be at most 200 (BatchWriteRow's limit), got {batch_rows}")
        return cls(
            settings=connection_settings(lowered),
            table=str(table),
            columns=columns,
            max_versions=_int(lowered, "max_versions", None, 1),
            time_range=time_range,
            split_size_mb=_int(lowered, "split_size_mb", 100, 1) or 100,
            max_split_count=_int(lowered, "max_split_count", 1000, 1) or 1000,
            page_rows=_int(lowered, "page_rows", 5000, 1) or 5000,
            mode=mode,
            corrupt_record_column=lowered.get("columnnameofcorruptrecord") or None,
            pushdown=_flag(lowered, "pushdown", True),
            show_replication_columns=_flag(lowered, "show_replication_columns", False),
            fence_column=str(lowered.get("fence_column") or FENCE_COLUMN),
            row_change=row_change,
            batch_rows=batch_rows or 200,
            fence_by=lowered.get("fence_by") or None,
            tunnel=lowered.get("tunnel") or None,
            max_records_per_trigger=_int(lowered, "max_records_per_trigger", None, 1),
            max_records_per_channel=_int(lowered, "max_records_per_channel", 100_000, 1) or 100_000,
            positions_table=str(lowered.get("positions_table") or "spark_tunnel_positions"),
            heartbeat_interval=float(_int(lowered, "heartbeat_interval", 5, 1) or 5),
            client_timeout=_int(lowered, "client_timeout", 60, 3) or 60,
            settle_ms=_int(lowered, "settle_ms", 200, 0) or 0,
            channel_wait_s=_int(lowered, "channel_wait_s", 300, 1) or 300,
            max_tasks_per_batch=_int(lowered, "max_tasks_per_batch", 32, 1) or 32,
        )
