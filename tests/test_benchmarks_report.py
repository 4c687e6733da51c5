"""BENCHMARKS.md is what ``make bench`` would rebuild: the results files of ``benchmarks/results`` in the report's
order, so no section written straight into BENCHMARKS.md is lost on the next run, and every benchmark script
that writes a results file has its section in the report's order."""

from __future__ import annotations

import re

from benchmarks.run_all import HERE, ROOT, SECTIONS, build_report


def test_benchmarks_md_is_the_report_of_the_results_files() -> None:
    assert (ROOT / "BENCHMARKS.md").read_text() == build_report(), (
        "BENCHMARKS.md differs from the report of benchmarks/results/*.md: edit the results file (or the script "
        "that writes it), then `python -m benchmarks.run_all --report-only`")


def test_every_results_file_a_script_writes_has_its_place() -> None:
    ordered = {f"{stem}.md" for stem, _title in SECTIONS}
    for script in sorted(HERE.glob("bench_*.py")):
        for name in re.findall(r'"results"\s*/\s*"([\w.-]+\.md)"', script.read_text()):
            assert name in ordered, f"{script.name} writes {name}, which is not in run_all.SECTIONS"
            assert (HERE / "results" / name).exists(), f"{script.name}: results/{name} was never written"
