"""No import cycles: every module of the package imports on its own, first, in a fresh interpreter.

A cycle through a package ``__init__`` works only when something else happened to be imported first; importing
each module alone, as the first import of a new interpreter, is what exposes it. Deprecated import paths are
also checked here: they still resolve, and they warn.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"

DEPRECATED_MODULES = {"airflow_tablestore.client.worker"}
"""Renamed packages kept for one release: importing them warns (checked below)."""


def package_modules() -> list[str]:
    """Every importable module of the package (``__main__`` modules run a program and are left out)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def import_alone(module: str) -> tuple[str, int, str]:
    code = f"import warnings; warnings.simplefilter('error'); import {module}"
    if module in DEPRECATED_MODULES:
        code = f"import warnings; warnings.simplefilter('ignore', DeprecationWarning); import {module}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    return module, result.returncode, result.stderr[-1500:]


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("airflow", reason="the airflow extra is not installed")
    modules = package_modules()
    assert len(modules) > 100
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        failures = [(m, err) for m, rc, err in pool.map(import_alone, modules) if rc != 0]
    assert not failures, "\n\n".join(f"{m}:\n{err}" for m, err in failures)


def test_the_old_connection_config_keeps_its_positional_order() -> None:
    code = (
        "import warnings; warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from airflow_tablestore.hooks.base import TablestoreConnectionConfig\n"
        "from airflow_tablestore.client.settings import ConnectionSettings\n"
        "c = TablestoreConnectionConfig('https://h', 'LTAIid', 'S3cr3tValue', 'inst', 'cn-hangzhou')\n"
        "assert isinstance(c, ConnectionSettings)\n"
        "assert (c.instance_name, c.access_key_id, c.access_key_secret, c.region) == "
        "('inst', 'LTAIid', 'S3cr3tValue', 'cn-hangzhou'), c\n"
        "assert 'S3cr3tValue' not in repr(c)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-1500:]


@pytest.mark.parametrize(
    ("statement", "new_home"),
    [
        ("from airflow_tablestore.client.worker import TunnelWorker", "tunnel_worker"),
        ("from airflow_tablestore.client.worker.channel import ChannelConsumer", "tunnel_worker"),
        ("from airflow_tablestore.client.service import ServiceClient", "base_client"),
        ("from airflow_tablestore.client.tunnel import to_ns", "client.epoch"),
        ("from airflow_tablestore.client.tunnel import enough_data", "tunnel_reads"),
        ("from airflow_tablestore.hooks.tunnel import to_epoch_ns", "client.epoch"),
        ("from airflow_tablestore.hooks.tunnel import evaluate_consume_point", "hooks.consume_point"),
        ("from airflow_tablestore.hooks.base import TablestoreConnectionConfig", "_LegacyConnectionConfig"),
        ("from airflow_tablestore.spark.settings import TablestoreSettings", "client.settings"),
    ],
)
def test_moved_names_still_import_with_a_deprecation_warning(statement: str, new_home: str) -> None:
    code = f"import warnings; warnings.simplefilter('error', DeprecationWarning)\n{statement}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "DeprecationWarning" in result.stderr, result.stderr[-1500:]
    assert new_home in result.stderr
    relaxed = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", statement],
                             capture_output=True, text=True, timeout=120)
    assert relaxed.returncode == 0, relaxed.stderr[-1500:]
