"""docs/emulator.md's DAG test, copied out and run with pytest the way a user runs it: no conftest, no
AIRFLOW_HOME, no migrated database; the installed plugin gives the emulator, an isolated Airflow and dag.test().
(tests/compat runs the same file in a fresh venv with the documented extras.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from airflow_helpers import run_user_pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "emulator.md"

pytestmark = pytest.mark.slow


def doc_test_file() -> str:
    """The Python block of docs/emulator.md that starts with ``# test_my_dag.py``."""
    blocks = re.findall(r"```python\n(# test_my_dag\.py\n.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/emulator.md must hold one '# test_my_dag.py' block"
    return blocks[0]


def test_the_documented_dag_test_passes_with_no_setup(tmp_path: Path) -> None:
    home = Path.home() / "airflow"
    existed = home.exists()
    run_user_pytest(tmp_path, {"test_my_dag.py": doc_test_file()}, passed=1)
    assert home.exists() == existed  # the isolated home, never ~/airflow
