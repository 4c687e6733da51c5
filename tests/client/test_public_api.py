"""``airflow_tablestore.client``: its lazy public API agrees with itself, and it is the one module that re-exports."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

import airflow_tablestore.client as client

INIT = Path(client.__file__)
PACKAGE = INIT.parent.parent


def _type_checking_imports() -> dict[str, str]:
    """The names the ``if TYPE_CHECKING:`` block imports, with their modules; each must be ``Name as Name``."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
               and node.test.id == "TYPE_CHECKING"]
    imports: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{ast.unparse(node)}: re-export as '{alias.name} as {alias.name}'"
            assert alias.name not in imports, f"{alias.name} imported twice"
            imports[alias.name] = node.module
    return imports


def test_type_checking_imports_exports_and_all_agree() -> None:
    assert _type_checking_imports() == client._EXPORTS
    assert client.__all__ == list(client._EXPORTS)
    assert len(set(client.__all__)) == len(client.__all__)


@pytest.mark.parametrize("name", sorted(client._EXPORTS))
def test_each_name_resolves_to_its_defining_module(name: str) -> None:
    module = importlib.import_module(client._EXPORTS[name])
    assert name in vars(module), f"{name} is not in {module.__name__}"
    assert getattr(client, name) is vars(module)[name]
    defined_in = getattr(vars(module)[name], "__module__", module.__name__)
    if isinstance(vars(module)[name], type):  # a class is defined where it is exported from, not re-exported
        assert defined_in == module.__name__, f"{name} is defined in {defined_in}, not {module.__name__}"


def test_no_other_package_init_re_exports() -> None:
    """``client/__init__.py`` is the package's one public-API module: no other ``__init__`` imports names from the
    package (callers import them from their defining modules); importing a module for its side effect (the
    Airflow version check) is not a re-export."""
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if init == INIT:
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        names = [f"{node.module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith("airflow_tablestore") for alias in node.names]
        relative = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        re_exported = [name for name in names if importlib.util.find_spec(name) is None]
        assert not relative and not re_exported, f"{init.relative_to(PACKAGE.parent)} re-exports: " \
                                                 f"{relative + re_exported}"
