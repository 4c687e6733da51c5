"""Emulator settings (:class:`EmulatorConfig`) and the command-line parser that fills them."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

SECRET_ENV = "TABLESTORE_EMULATOR_ACCESS_KEY_SECRET"


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
    verify_signature: bool = True
    log_level: str = "INFO"


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
    p.add_argument("--access-key-secret", default=os.environ.get(SECRET_ENV, d.access_key_secret),
                   help=f"default: ${SECRET_ENV} if set (keeps the secret out of the process list)")
    p.add_argument("--data-dir", default=None, help="omitted: a temporary directory removed on exit")
    p.add_argument("--stream-partitions", type=int, default=d.stream_partitions)
    p.add_argument("--base-channel-rows", type=int, default=d.base_channel_rows,
                   help="rows per BaseData channel range")
    p.add_argument("--max-read-records", type=int, default=d.max_read_records,
                   help="tunnel records per ReadRecords")
    p.add_argument("--stream-retention-hours", type=int, default=d.stream_retention_hours)
    p.add_argument("--range-page-rows", type=int, default=d.range_page_rows, help="GetRange page budget")
    p.add_argument("--no-verify-signature", action="store_true")
    p.add_argument("--log-level", default=d.log_level)
    return p


def parse_args(argv: list[str] | None = None) -> EmulatorConfig:
    """Parse command-line arguments into an :class:`EmulatorConfig`."""
    ns = build_parser().parse_args(argv)
    if ns.stream_partitions < 1:
        raise SystemExit("--stream-partitions must be >= 1")
    if ns.range_page_rows < 1:
        raise SystemExit("--range-page-rows must be >= 1")
    return EmulatorConfig(
        host=ns.host,
        port=ns.port,
        instance=ns.instance,
        access_key_id=ns.access_key_id,
        access_key_secret=ns.access_key_secret,
        data_dir=ns.data_dir,
        stream_partitions=ns.stream_partitions,
        base_channel_rows=ns.base_channel_rows,
        max_read_records=ns.max_read_records,
        stream_retention_hours=ns.stream_retention_hours,
        range_page_rows=ns.range_page_rows,
        verify_signature=not ns.no_verify_signature,
        log_level=ns.log_level,
    )
