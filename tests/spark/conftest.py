"""Fixtures of the Spark consumer tests: a real emulator process and clients."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client.table import TableClient
from airflow_tablestore.client.tunnel import TunnelClient
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.spark.settings import TablestoreSettings

_names = itertools.count()


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--base-channel-rows", "400", "--stream-partitions", "2",
                                     "--max-read-records", "150"]) as emu:
        yield emu


@pytest.fixture(scope="module")
def table_client(emulator: EmulatorProcess) -> Iterator[TableClient]:
    with TableClient(**emulator.client_kwargs) as client:
        yield client


@pytest.fixture(scope="module")
def tunnel_client(emulator: EmulatorProcess) -> Iterator[TunnelClient]:
    with TunnelClient(**emulator.client_kwargs) as client:
        yield client


@pytest.fixture(scope="module")
def settings(emulator: EmulatorProcess) -> TablestoreSettings:
    return TablestoreSettings(emulator.endpoint, emulator.instance, emulator.access_key_id,
                              emulator.access_key_secret)


@pytest.fixture
def unique() -> Any:
    """A fresh name per call: ``unique("src")`` → ``src_<n>``."""
    return lambda prefix: f"{prefix}_{next(_names)}"
