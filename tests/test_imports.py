"""No import cycles: every module of the package imports on its own, first, in a fresh interpreter.

A cycle through a package ``__init__`` works only when something else happened to be imported first; importing
each module alone, as the first import of a new interpreter, is what exposes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"

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

