"""A package's import statements read with ``ast`` (imports inside functions included): shared by the layering
rules (``test_layering.py``) and the import-alone check (``import_alone.py``)."""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    """The dotted name of ``path``, a file of the package whose directory is ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, root: Path) -> bool:
    where = root.parent.joinpath(*name.split("."))
    return where.with_suffix(".py").exists() or (where / "__init__.py").exists() or any(
        where.parent.glob(where.name + ".*.so")) or where.with_suffix(".c").exists()


def imports_of(path: Path, root: Path) -> set[str]:
    """Every module ``path`` (a file of the package at ``root``) imports, at any depth of its code (relative imports
    resolved; ``from X import y`` counts ``X.y`` when that is a module of the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            for alias in node.names:
                if is_module(f"{source}.{alias.name}", root):
                    found.add(f"{source}.{alias.name}")
    return found
