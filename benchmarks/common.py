"""Pieces shared by the benchmark scripts: the standard benchmark table, a thread-safe record counter with the
no-op tunnel processor built on it, the emulator + ``local[2]`` Spark set-up of the Spark benchmarks, and access
to the emulator tests' raw-HTTP helpers."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablestore.client.model import (
    Column,
    PrimaryKeyColumn,
    PrimaryKeyType,
    Record,
    RowWrite,
    StreamSpec,
    TableSchema,
    WriteType,
)
from airflow_tablestore.client.settings import ConnectionSettings
from airflow_tablestore.client.table.client import TableClient
from airflow_tablestore.client.tunnel.client import TunnelClient
from airflow_tablestore.client.tunnel.processor import ChannelContext, ChannelProcessor
from airflow_tablestore.emulator.testing import EmulatorProcess

ROOT = Path(__file__).resolve().parent.parent


def load_user_rows(tables: TableClient, table: str, rows: int, *, stream: StreamSpec | None = None) -> None:
    """Create ``table`` (int key ``id``) and write ``rows`` rows of four small columns (name, score, ratio,
    active) with ``write_rows``."""
    tables.create_table(TableSchema(table, (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),), stream=stream))
    tables.write_rows(
        RowWrite(table, WriteType.PUT, (("id", i),),
                 (Column("name", f"user-{i}"), Column("score", i * 7), Column("ratio", i / 3.0),
                  Column("active", i % 2 == 0)))
        for i in range(rows)
    )


class RecordCounter:
    """Counts records across threads; ``done`` is set once ``expected`` records were counted."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n
            if self.count >= self.expected:
                self.done.set()


class CountingChannelProcessor(ChannelProcessor):
    """No-op TunnelWorker processor: counts the records it is given."""

    def __init__(self, counter: RecordCounter) -> None:
        self.counter = counter

    def process(self, records: list[Record], context: ChannelContext) -> None:
        self.counter.add(len(records))


def timed_count(label: str, fn: Callable[[], int], expected: int) -> float:
    """Seconds ``fn`` took; raises unless it reports exactly ``expected`` records/rows."""
    started = time.perf_counter()
    seen = fn()
    elapsed = time.perf_counter() - started
    if seen != expected:
        raise RuntimeError(f"{label}: {seen} records/rows, expected {expected}")
    return elapsed


@dataclass
class SparkBench:
    """What a Spark benchmark runs against: one emulator process (data in ``work/emu``), clients of it, and a
    ``local[2]`` Spark session started on the first :meth:`spark` call."""

    work: Path
    emulator: EmulatorProcess
    tables: TableClient
    tunnels: TunnelClient
    settings: ConnectionSettings
    app_name: str
    session: Any = field(default=None, repr=False)
    startup_s: float = 0.0
    """Seconds the Spark session took to start (0 until :meth:`spark` was called)."""

    @property
    def connection(self) -> dict[str, str]:
        """The emulator's connection options of the ``tablestore`` data source."""
        emu = self.emulator
        return {"endpoint": emu.endpoint, "instance": emu.instance, "access_key_id": emu.access_key_id,
                "access_key_secret": emu.access_key_secret}

    def spark(self) -> Any:
        """The ``local[2]`` session (UI off, log level ERROR), started on first use."""
        if self.session is None:
            from pyspark.sql import SparkSession

            started = time.monotonic()
            self.session = (SparkSession.builder.master("local[2]").appName(self.app_name)
                            .config("spark.ui.enabled", "false").getOrCreate())
            self.session.sparkContext.setLogLevel("ERROR")
            self.startup_s = time.monotonic() - started
        return self.session


@contextmanager
def spark_bench(name: str, emulator_args: Sequence[str] = ()) -> Iterator[SparkBench]:
    """Set up a Spark benchmark: the environment Spark's Python workers need (this interpreter; the repository
    root on ``PYTHONPATH``, where they import the package and Spark finds ``pyspark_tablestore.py``, the lookup of
    the ``tablestore`` format; loopback), a temporary work directory ``bench-NAME-*`` and one emulator process
    (``--log-level WARNING`` plus ``emulator_args``). On exit: the Spark session (if started) and the emulator
    are stopped and the work directory is removed."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    (work / "emu").mkdir()
    emulator = EmulatorProcess(data_dir=work / "emu", extra_args=[*emulator_args, "--log-level", "WARNING"])
    bench: SparkBench | None = None
    try:
        emulator.start()
        settings = ConnectionSettings(emulator.endpoint, emulator.instance, emulator.access_key_id,
                                      emulator.access_key_secret)
        bench = SparkBench(work, emulator, TableClient(**emulator.client_kwargs),
                           TunnelClient(**emulator.client_kwargs), settings, f"bench-{name}")
        yield bench
    finally:
        if bench is not None:
            if bench.session is not None:
                bench.session.stop()
            bench.tables.close()
            bench.tunnels.close()
        emulator.close()
        shutil.rmtree(work, ignore_errors=True)
