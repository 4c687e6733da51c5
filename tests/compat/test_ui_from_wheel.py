"""The Tablestore page in a real browser, served by the provider installed from the built wheel (issue 32, item 5).

tests/e2e/test_ui_page.py runs in the venv of the matrix's "one install command" cell (test_matrix.py's
``USER_INSTALL``: the wheel with ``[airflow,spark,testing]``, built once per session): Airflow's real api-server,
``airflow dags test`` runs and headless Chromium (Debian's, ``make browser``) driven by Playwright, which this test
installs into that venv for the run and removes afterwards (the venv stays what a user's install is, for the
journeys and the next session). The checkout must not be importable there: ``PYTHONSAFEPATH=1`` keeps the
working directory off ``sys.path`` (for pytest and, inherited, for every Airflow process), and pytest's
``pythonpath`` is narrowed to ``tests/`` (the shared helpers) and a directory holding only the repository's
``demo`` tooling, which the end-to-end helpers import. The module itself checks that the api-server's interpreter
imports ``airflow_tablestore`` from the venv's site-packages (``TABLESTORE_UI_INSTALLED``). Screenshots and the
api-server's log are kept in ``tests/artifacts/ui/``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from .envs import REPO, build
from .test_matrix import USER_INSTALL

pytestmark = pytest.mark.timeout(3600)

PLAYWRIGHT = "playwright>=1.45"  # as the test extra pins it
UI_TEST = "tests/e2e/test_ui_page.py"
SCREENSHOTS = ("tablestore-page.png", "tablestore-page-content.png")


def _installed(bin_dir: Path) -> set[str]:
    listed = subprocess.run([str(bin_dir / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                            text=True, check=True).stdout
    return {line.split("==")[0].split(" @ ")[0].lower() for line in listed.splitlines() if line.strip()}


def test_the_page_in_a_browser_from_the_wheel(dists: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = dists
    bin_dir = build(USER_INSTALL, wheel)
    chromium = os.environ.get("TABLESTORE_CHROMIUM", "/usr/bin/chromium")
    assert Path(chromium).exists(), f"{chromium} is missing: `make browser` installs Debian's chromium"
    before = _installed(bin_dir)
    started = time.time()
    add = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          PLAYWRIGHT], capture_output=True, text=True, timeout=600)
    try:
        assert add.returncode == 0, add.stdout[-3000:] + add.stderr[-3000:]
        tooling = tmp_path / "repository-tooling"  # the test helpers and nothing else of the checkout
        tooling.mkdir()
        for helpers in ("demo", "testing"):
            (tooling / helpers).symlink_to(REPO / helpers, target_is_directory=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
        env.update({"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "PYTHONSAFEPATH": "1",
                    "TABLESTORE_BROWSER": "1", "TABLESTORE_UI_INSTALLED": str(bin_dir.parent)})
        result = subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                                 "-o", f"pythonpath=tests {tooling}", UI_TEST],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    finally:
        added = sorted(_installed(bin_dir) - before)
        if added:
            subprocess.run([str(bin_dir / "python"), "-m", "pip", "uninstall", "-y", "-q", *added],
                           capture_output=True, text=True, check=True)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-3000:]
    # every test of the module ran here (the browser test and the overview too), none skipped
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) >= 5 and not re.search(r"skipped|failed|error", summary), \
        result.stdout[-4000:]
    artifacts = REPO / "tests" / "artifacts" / "ui"
    for name in SCREENSHOTS:
        assert (artifacts / name).stat().st_mtime >= started, name
    print(f"[compat] {UI_TEST} against the wheel {wheel.name} (api-server, dags test, Chromium): {summary}; "
          f"screenshots in {artifacts.relative_to(REPO)}; playwright added and removed: {', '.join(added)}",
          flush=True)
