"""Tests and benchmarks are independent: neither imports the other nor edits ``sys.path`` to reach it; what both
need is in ``testing/``, which imports neither."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", re.MULTILINE)
# BENCHMARKS.md is a doc whose claims a test checks: the report builder is what that test exercises.
_REPORT_TEST = ROOT / "tests" / "test_benchmarks_report.py"
# the tests' own helper modules, importable by bare name through ``pythonpath`` (pyproject.toml)
_TEST_HELPERS = {path.stem for path in (ROOT / "tests").rglob("*.py")}


def _imports(path: Path) -> set[str]:
    return {match.group(1).split(".")[0] for match in _IMPORT.finditer(path.read_text(encoding="utf-8"))}


def test_benchmarks_import_no_tests_and_leave_sys_path_alone() -> None:
    offenders = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        bad = sorted(name for name in _imports(path) if name == "tests" or name in _TEST_HELPERS)
        if bad or "sys.path" in text:
            offenders[path.name] = bad or ["sys.path"]
    assert offenders == {}


def test_tests_import_no_benchmarks() -> None:
    offenders = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "tests").rglob("*.py"))
                 if path != _REPORT_TEST and "benchmarks" in _imports(path)]
    assert offenders == []


def test_the_shared_helpers_import_neither() -> None:
    helpers = sorted((ROOT / "testing").glob("*.py"))
    assert len(helpers) >= 5
    assert {path.name: sorted(_imports(path) & {"tests", "benchmarks"}) for path in helpers} == {
        path.name: [] for path in helpers}
