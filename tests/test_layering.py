"""Architecture rules: client/, emulator/ import without Airflow or PySpark; spark/, example jobs without Airflow."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

_CLIENT_IMPORT = re.compile(r"^\s*(from|import)\s+airflow_tablestore\.client\b", re.MULTILINE)
PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"

_BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def __init__(self, names): self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in self.names:
            raise ImportError(f'layering violation: {{name}} imported')
sys.meta_path.insert(0, Block({blocked!r}))
import importlib, pkgutil
for module in {modules!r}:
    importlib.import_module(module)
print('ok')
"""


def _modules(subpackage: str) -> list[str]:
    root = PACKAGE / subpackage
    names = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@pytest.mark.parametrize(
    ("subpackage", "blocked"),
    [("client", {"airflow", "pyspark"}), ("emulator", {"airflow", "pyspark"}), ("spark", {"airflow"}),
     ("example_dags/jobs", {"airflow"}),  # the example DAGs' PySpark jobs run on Spark, without Airflow
     ("ui", {"pyspark"})],  # the UI page runs in the api-server: Airflow, the hooks and the client, never Spark
)
def test_subpackage_imports_without_forbidden_dependencies(subpackage: str, blocked: set[str]) -> None:
    # each row needs what it may import: spark/ and the jobs need PySpark, the page needs Airflow
    if subpackage in ("spark", "example_dags/jobs"):
        pytest.importorskip("pyspark", reason="the spark extra is not installed (client/emulator-only venv)")
    if subpackage == "ui":
        # airflow.sdk, not airflow: tests/ is on sys.path, and its airflow/ folder is a namespace package "airflow"
        pytest.importorskip("airflow.sdk", reason="the airflow extra is not installed (client/emulator-only venv)")
    modules = _modules(subpackage)
    code = _BLOCKER.format(blocked=sorted(blocked), modules=modules)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_emulator_does_not_import_client() -> None:
    """The emulator and the client share only the wire format (protocol/), so each tests the other."""
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in (PACKAGE / "emulator").rglob("*.py")
        if _CLIENT_IMPORT.search(path.read_text())
    ]
    assert offenders == []
