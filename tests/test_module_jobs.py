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


# Folders whose module names are user-facing names, not parts of a subsystem: an example DAG's module is named
# after its DAG id (``from airflow_tablestore.example_dags.<dag_id> import dag``), and the DAG ids share "tablestore_".
NAMED_BY_DAG_ID = {PACKAGE / "example_dags"}


@pytest.mark.parametrize("folder", [f for f in FOLDERS if f not in NAMED_BY_DAG_ID],
                         ids=lambda f: str(f.relative_to(PACKAGE.parent)))
def test_no_name_prefix_group_instead_of_a_subpackage(folder: Path) -> None:
    stems = [p.stem for p in folder.glob("*.py") if not p.name.startswith("__") and not p.name.endswith("_pb2.py")]
    groups = {prefix: n for prefix, n in Counter(s.split("_")[0] for s in stems).items() if n >= 3}
    assert not groups, f"{folder.relative_to(PACKAGE.parent)}: files sharing a name prefix {groups}: a subpackage?"


def _named(node: ast.expr, *names: str) -> bool:
    """``node`` is one of ``names``, plain (``Protocol``), qualified (``abc.ABC``) or subscripted
    (``Protocol[T]``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Name) and node.id in names) or (isinstance(node, ast.Attribute)
                                                                and node.attr in names)


def _declares_an_interface(function: ast.FunctionDef | ast.AsyncFunctionDef | None,
                           cls: ast.ClassDef | None) -> bool:
    """An abstract method, or a method of a Protocol or ABC: an interface users implement."""
    if function is not None and any(_named(d, "abstractmethod") for d in function.decorator_list):
        return True
    return cls is not None and (any(_named(base, "Protocol", "ABC") for base in cls.bases)
                                or any(k.arg == "metaclass" and _named(k.value, "ABCMeta") for k in cls.keywords))


def _not_implemented_stubs(tree: ast.Module) -> list[int]:
    """Lines raising ``NotImplementedError`` outside an interface (see :func:`_declares_an_interface`)."""
    stubs: list[int] = []

    def visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None,
              cls: ast.ClassDef | None) -> None:
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _named(exc, "NotImplementedError") and not _declares_an_interface(function, cls):
                stubs.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, None, child)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child, cls)
            else:
                visit(child, function, cls)

    visit(tree, None, None)
    return stubs


@pytest.mark.parametrize("path", MODULES, ids=_ids)
def test_no_stub_standing_in_for_a_sibling_and_no_shim(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert "DeprecationWarning" not in source, f"{_ids(path)}: a deprecation shim in an unreleased package"
    # Only an interface users implement may say "override me": an abstract method, or a Protocol's or ABC's.
    stubs = _not_implemented_stubs(ast.parse(source))
    assert not stubs, (f"{_ids(path)}: NotImplementedError stubs on lines {stubs} outside an abstract method or "
                       "a Protocol/ABC: compose the parts instead")


@pytest.mark.parametrize(("source", "stubs"), [
    ("class A:\n    def f(self):\n        raise NotImplementedError\n", [3]),
    ("class A:\n    def f(self):\n        class P(Protocol): ...\n        raise NotImplementedError\n", [4]),
    ("class A:\n    @abstractmethod\n    def f(self):\n        raise NotImplementedError\n", []),
    ("class A:\n    @abc.abstractmethod\n    def f(self):\n        raise NotImplementedError()\n", []),
    ("class P(Protocol[T]):\n    def f(self):\n        raise NotImplementedError\n", []),
    ("class B(metaclass=ABCMeta):\n    def f(self):\n        raise NotImplementedError\n", []),
    ("def f():\n    raise NotImplementedError('x')\n", [2]),
])
def test_the_stub_check_looks_at_the_enclosing_function_and_class(source: str, stubs: list[int]) -> None:
    assert _not_implemented_stubs(ast.parse(source)) == stubs
