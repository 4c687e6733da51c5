"""The tree shows the architecture: every module states its one job, and no folder hides a subpackage.

Size follows the job, so there is no line limit; what is checked is what a size rule was a proxy for: a job
stated in one line, modules that do something themselves (not re-export another's names), subsystems as
subpackages (not files sharing a name prefix), parts composed (no ``NotImplementedError`` stubs reaching a
sibling mixin), and no deprecation shims in a package that has never been released.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if not p.name.endswith("_pb2.py"))
FOLDERS = sorted({p.parent for p in MODULES})


def _ids(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", MODULES, ids=_ids)
def test_module_states_its_job(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring and docstring.strip(), f"{_ids(path)}: no module docstring stating its job"
    first_line = docstring.strip().splitlines()[0]
    assert len(first_line) >= 20, f"{_ids(path)}: the docstring's first line does not state a job: {first_line!r}"


def _defines_something(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if names - {"__all__", "log", "logger"}:
                return True
    return False


@pytest.mark.parametrize("path", [p for p in MODULES if p.name != "__init__.py"], ids=_ids)
def test_module_is_not_only_a_re_export(path: Path) -> None:
    assert _defines_something(ast.parse(path.read_text(encoding="utf-8"))), (
        f"{_ids(path)} defines nothing itself: import the names from the module that defines them"
    )


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(PACKAGE.parent)))
def test_no_name_prefix_group_instead_of_a_subpackage(folder: Path) -> None:
    stems = [p.stem for p in folder.glob("*.py") if not p.name.startswith("__") and not p.name.endswith("_pb2.py")]
    groups = {prefix: n for prefix, n in Counter(s.split("_")[0] for s in stems).items() if n >= 3}
    assert not groups, f"{folder.relative_to(PACKAGE.parent)}: files sharing a name prefix {groups}: a subpackage?"


@pytest.mark.parametrize("path", MODULES, ids=_ids)
def test_no_stub_standing_in_for_a_sibling_and_no_shim(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert "DeprecationWarning" not in source, f"{_ids(path)}: a deprecation shim in an unreleased package"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                # Only an interface users implement may say "override me"; it is an ABC then.
                assert "abstractmethod" in source or "Protocol" in source, (
                    f"{_ids(path)}:{node.lineno}: a NotImplementedError stub: compose the parts instead"
                )
