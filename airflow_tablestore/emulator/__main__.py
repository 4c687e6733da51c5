"""``python -m airflow_tablestore.emulator`` / ``tablestore-emulator``: run the local Tablestore emulator."""

from __future__ import annotations

import logging
import shutil
import signal
import sys
import tempfile
import threading
from types import FrameType

from airflow_tablestore.emulator.config import parse_args
from airflow_tablestore.emulator.server import Emulator


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
    emulator = Emulator(config, data_dir)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not stopping.is_set():
            stopping.set()
            logging.getLogger(__name__).info("signal %s: shutting down", signum)
            threading.Thread(target=emulator.httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(
        f"Tablestore emulator listening on {emulator.endpoint} instance={config.instance} data_dir={data_dir}",
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
