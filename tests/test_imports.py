"""No import cycles: every module of the package imports on its own, first, with warnings as errors.

A cycle through a package ``__init__`` works only when something else happened to be imported first; importing
each module alone, as the first import of the package in a process, is what exposes it
(``tests/import_alone.py``: third-party modules preloaded once, each package module in a forked child).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import module_name

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"
HELPER = Path(__file__).resolve().parent / "import_alone.py"


def package_modules(package: Path = PACKAGE) -> list[str]:
    """Every importable module of the package (``__main__`` modules run a program and are left out)."""
    return [module_name(path, package) for path in sorted(package.rglob("*.py")) if path.name != "__main__.py"]


def failures_importing_alone(package: Path) -> dict[str, str]:
    """Module → traceback, for every module of ``package`` that fails to import alone."""
    result = subprocess.run([sys.executable, str(HELPER), str(package), *package_modules(package)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    failures: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return failures


def test_every_module_imports_alone() -> None:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("airflow", reason="the airflow extra is not installed")
    assert len(package_modules()) > 100
    failures = failures_importing_alone(PACKAGE)
    assert not failures, "\n\n".join(f"{m}:\n{err}" for m, err in failures.items())


def test_a_cycle_and_a_warning_are_caught(tmp_path: Path) -> None:
    """The check fails a module that imports only when something else came first, and one that warns."""
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic.b import B\nA = 1\n")
    (package / "b.py").write_text("from cyclic.a import A\nB = 2\n")
    (package / "loud.py").write_text("import warnings\nwarnings.warn('deprecated', DeprecationWarning)\n")
    (package / "fine.py").write_text("import json\nVALUE = json.dumps(1)\n")
    failures = failures_importing_alone(package)
    assert sorted(failures) == ["cyclic.a", "cyclic.b", "cyclic.loud"]
    assert "ImportError" in failures["cyclic.a"] and "DeprecationWarning" in failures["cyclic.loud"]
