"""docs/ARCHITECTURE.md's tree is the package's tree, and every path the docs name exists.

The map's "The tree" block lists every subpackage and module of ``airflow_tablestore`` (generated protobuf
modules and ``__init__.py`` aside; the C sources of extension modules and the shipped .properties included),
indented two spaces a level.
A module added, moved or removed without the map following fails here, and so does a doc naming a file that
is not there.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "airflow_tablestore"
MAP = REPO / "docs" / "ARCHITECTURE.md"
MAPPED_SUFFIXES = (".py", ".proto", ".c", ".h", ".properties")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def map_entries() -> set[str]:
    """The paths the map's tree block lists, relative to the repository (``airflow_tablestore/client/``...)."""
    text = MAP.read_text(encoding="utf-8")
    block = re.search(r"## The tree\n.*?```text\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md has no '## The tree' section with a ```text block"
    stack: list[str] = []
    entries = set()
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        indent = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del stack[indent:]
        assert len(stack) == indent, f"bad indentation in the map: {line!r}"
        path = "".join(stack) + name
        entries.add(path)
        if name.endswith("/"):
            stack.append(name)
    return entries


def tree_entries() -> set[str]:
    entries = {"airflow_tablestore/"}
    for path in PACKAGE.rglob("*"):
        rel = path.relative_to(REPO).as_posix()
        if "__pycache__" in rel:
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            entries.add(rel + "/")
        elif path.suffix in MAPPED_SUFFIXES and path.name != "__init__.py" and not path.name.endswith("_pb2.py"):
            entries.add(rel)
    return entries


def test_the_map_lists_exactly_the_tree() -> None:
    listed, actual = map_entries(), tree_entries()
    assert not actual - listed, f"in the tree, missing from docs/ARCHITECTURE.md: {sorted(actual - listed)}"
    missing = {entry for entry in listed - actual if not (REPO / entry).is_file()}  # data files may be listed too
    assert not missing, f"in docs/ARCHITECTURE.md, not in the tree: {sorted(missing)}"


_PATH = re.compile(r"`((?:airflow_tablestore/)?(?:[a-z_0-9]+/)+[a-z_0-9]+\.(?:py|proto|md|sh)|"
                   r"(?:airflow_tablestore/)?(?:client|emulator|spark|hooks|operators|sensors|triggers|assets"
                   r"|protocol|replication)(?:/[a-z_0-9]+)*/)`")
_ROOTS = [REPO, PACKAGE, REPO / "docs"]


def test_every_path_the_docs_name_exists() -> None:
    from compat.journey_steps import all_steps

    users_files = {step.argument for step in all_steps() if step.action == "file"}  # docs/first-hour.md's project
    missing = []
    for doc in DOCS:
        for ref in _PATH.findall(doc.read_text(encoding="utf-8")):
            if ref not in users_files and not any((root / ref).exists() for root in _ROOTS):
                missing.append(f"{doc.relative_to(REPO)}: {ref}")
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)
