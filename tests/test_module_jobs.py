"""Every module says its one job in its docstring's first line, and stays small or says why it is not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"
MAX_LINES = 400
"""Above this a module must say at its top why it is one module (a docstring paragraph starting "Size")."""

MODULES = sorted(p for p in PACKAGE.rglob("*.py") if not p.name.endswith("_pb2.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_states_its_job_and_size(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring and docstring.strip(), f"{path.name}: no module docstring stating its job"
    first_line = docstring.strip().splitlines()[0]
    assert len(first_line) >= 20, f"{path.name}: the docstring's first line does not state a job: {first_line!r}"
    lines = source.count("\n")
    if lines > MAX_LINES:
        assert "\nSize" in docstring, f"{path.name} has {lines} lines and no 'Size ...' reason at its top"
