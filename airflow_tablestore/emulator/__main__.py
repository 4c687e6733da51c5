"""``python -m airflow_tablestore.emulator`` / ``tablestore-emulator``: run the local Tablestore emulator."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
from types import FrameType

from airflow_tablestore.emulator.clock import ClockError
from airflow_tablestore.emulator.config import SECRET_ENV, is_loopback, parse_args
from airflow_tablestore.emulator.server import Emulator


def prepare_data_dir(data_dir: str) -> str | None:
    """Create ``data_dir`` (and its parents) if needed; a one-line problem description if it is unusable."""
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as exc:
        return f"cannot create the data directory {data_dir!r}: {exc.strerror or exc}"
    if not os.path.isdir(data_dir):
        return f"the data directory {data_dir!r} exists but is not a directory"
    if not os.access(data_dir, os.W_OK | os.X_OK):
        return f"the data directory {data_dir!r} is not writable by this user"
    return None


def main(argv: list[str] | None = None) -> int:
    """Start the emulator, print its endpoint line, serve until SIGTERM/SIGINT; returns the exit code."""
    config = parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, config.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    tmp: str | None = None
    data_dir = config.data_dir
    if data_dir is None:
        tmp = data_dir = tempfile.mkdtemp(prefix="tablestore-emulator-")
    else:
        problem = prepare_data_dir(data_dir)
        if problem:
            print(f"tablestore-emulator: {problem}", file=sys.stderr)
            return 2
    try:
        emulator = Emulator(config, data_dir)
    except ClockError as exc:
        print(f"tablestore-emulator: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:
        print(f"tablestore-emulator: cannot start on {config.host}:{config.port} with data in {data_dir}: "
              f"{exc}", file=sys.stderr)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return 2
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not stopping.is_set():
            stopping.set()
            logging.getLogger(__name__).info("signal %s: shutting down", signum)
            threading.Thread(target=emulator.httpd.shutdown, daemon=True).start()

    if not is_loopback(config.host):
        print(f"tablestore-emulator: WARNING: listening on {config.host}, not only on loopback: anyone who "
              "can reach this port can read and write its data with the (well-known) default credentials "
              "unless you set "
              f"your own secret (${SECRET_ENV} or --access-key-secret-file)", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(
        f"Tablestore emulator listening on {emulator.endpoint} instance={config.instance} "
        f"data_dir={data_dir}",
        flush=True,
    )
    try:
        emulator.serve_forever()
    finally:
        emulator.shutdown()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
