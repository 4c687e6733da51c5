"""Emulator settings (:class:`EmulatorConfig`) and the command-line parser that fills them."""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import time
from dataclasses import dataclass, field

SECRET_ENV = "TABLESTORE_EMULATOR_ACCESS_KEY_SECRET"
SECRET_FILE_ENV = "TABLESTORE_EMULATOR_ACCESS_KEY_SECRET_FILE"


@dataclass
class EmulatorConfig:
    """Everything the emulator process is configured with. The secret never appears in ``repr``."""

    host: str = "127.0.0.1"
    port: int = 0
    instance: str = "emulator"
    access_key_id: str = "emulator-access-key-id"
    access_key_secret: str = field(default="emulator-access-key-secret", repr=False)
    data_dir: str | None = None
    stream_partitions: int = 4
    base_channel_rows: int = 10000
    max_read_records: int = 1000
    stream_retention_hours: int = 168
    range_page_rows: int = 5000
    read_cache_mb: int = 512
    verify_signature: bool = True
    log_level: str = "INFO"
    connection_timeout: float = 60.0
    clock_offset_s: float = 0.0
    clock_explicit: bool = False


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tablestore-emulator",
        description="Local Alibaba Cloud Tablestore emulator (table API, stream log, tunnel service).",
    )
    d = EmulatorConfig()
    p.add_argument("--host", default=d.host)
    p.add_argument("--port", type=int, default=d.port, help="0 picks a free port")
    p.add_argument("--instance", default=d.instance)
    p.add_argument("--access-key-id", default=d.access_key_id)
    secret = p.add_mutually_exclusive_group()
    secret.add_argument("--access-key-secret", default=None,
                        help=f"visible in process listings: prefer ${SECRET_ENV} or --access-key-secret-file")
    secret.add_argument("--access-key-secret-file", default=os.environ.get(SECRET_FILE_ENV),
                        help=f"file holding the secret (first line); default ${SECRET_FILE_ENV}")
    p.add_argument("--data-dir", default=None, help="omitted: a temporary directory removed on exit")
    p.add_argument("--stream-partitions", type=int, default=d.stream_partitions)
    p.add_argument("--base-channel-rows", type=int, default=d.base_channel_rows,
                   help="rows per BaseData channel range")
    p.add_argument("--max-read-records", type=int, default=d.max_read_records,
                   help="tunnel records per ReadRecords")
    p.add_argument("--stream-retention-hours", type=int, default=d.stream_retention_hours)
    p.add_argument("--range-page-rows", type=int, default=d.range_page_rows, help="GetRange page budget")
    p.add_argument("--read-cache-mb", type=int, default=d.read_cache_mb,
                   help="memory for tables, snapshots and stream partitions read again (0: read SQLite always)")
    p.add_argument("--no-verify-signature", action="store_true")
    p.add_argument("--connection-timeout", type=float, default=d.connection_timeout,
                   help="seconds a connection may stay silent (mid-request or idle keep-alive) before it is "
                        "closed")
    p.add_argument("--log-level", default=d.log_level)
    clock = p.add_mutually_exclusive_group()
    clock.add_argument("--clock-start", default=None,
                       help="start the emulated clock at this ISO-8601 UTC time (e.g. 2026-11-01T00:00:00Z), "
                            "then let it run; for writing changes inside past intervals (backfill tests)")
    clock.add_argument("--clock-offset", type=float, default=None,
                       help="start the emulated clock this many seconds from the wall clock "
                            "(negative: the past)")
    return p


def _secret(ns: argparse.Namespace) -> str:
    """The AccessKey secret: flag, else file, else ``$TABLESTORE_EMULATOR_ACCESS_KEY_SECRET``, else the
    default."""
    if ns.access_key_secret:
        return str(ns.access_key_secret)
    if ns.access_key_secret_file:
        try:
            with open(ns.access_key_secret_file, encoding="utf-8") as handle:
                secret = handle.readline().strip()
        except OSError as exc:
            raise SystemExit(
                f"--access-key-secret-file {ns.access_key_secret_file}: {exc.strerror or exc}") from None
        if not secret:
            raise SystemExit(f"--access-key-secret-file {ns.access_key_secret_file} is empty")
        return secret
    return os.environ.get(SECRET_ENV) or EmulatorConfig.access_key_secret


def _clock_offset(ns: argparse.Namespace) -> float:
    if ns.clock_offset is not None:
        return float(ns.clock_offset)
    if ns.clock_start is None:
        return 0.0
    try:
        start = dt.datetime.fromisoformat(ns.clock_start.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(
            f"--clock-start {ns.clock_start!r} is not an ISO-8601 time (e.g. 2026-11-01T00:00:00Z)") from None
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.UTC)
    return start.timestamp() - time.time()


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_args(argv: list[str] | None = None) -> EmulatorConfig:
    """Parse command-line arguments into an :class:`EmulatorConfig`."""
    ns = build_parser().parse_args(argv)
    if ns.stream_partitions < 1:
        raise SystemExit("--stream-partitions must be >= 1")
    if ns.range_page_rows < 1:
        raise SystemExit("--range-page-rows must be >= 1")
    if ns.read_cache_mb < 0:
        raise SystemExit("--read-cache-mb must be >= 0")
    if ns.connection_timeout <= 0:
        raise SystemExit("--connection-timeout must be > 0")
    return EmulatorConfig(
        host=ns.host,
        port=ns.port,
        instance=ns.instance,
        access_key_id=ns.access_key_id,
        access_key_secret=_secret(ns),
        data_dir=ns.data_dir,
        stream_partitions=ns.stream_partitions,
        base_channel_rows=ns.base_channel_rows,
        max_read_records=ns.max_read_records,
        stream_retention_hours=ns.stream_retention_hours,
        range_page_rows=ns.range_page_rows,
        read_cache_mb=ns.read_cache_mb,
        verify_signature=not ns.no_verify_signature,
        log_level=ns.log_level,
        connection_timeout=ns.connection_timeout,
        clock_offset_s=_clock_offset(ns),
        clock_explicit=ns.clock_start is not None or ns.clock_offset is not None,
    )
