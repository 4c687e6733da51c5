"""End-to-end fixtures: a real emulator per module (the Spark and Airflow helpers are in ``spark_runs``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess

# The crash matrix takes minutes: `make test-crash` (and .ci/run) runs it, `make test` does not.
collect_ignore = [] if os.environ.get("TABLESTORE_CRASH") else ["test_crash_matrix.py", "test_stream_crash.py"]


@pytest.fixture(scope="module")
def tablestore_emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "500", "--stream-partitions", "2",
                                     "--max-read-records", "50"]) as emu:
        yield emu
