"""Airflow-layer test fixtures, shared with tests/airflow (isolated AIRFLOW_HOME, emulator, connections)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))

from tablestore_airflow_testing import *  # noqa: E402,F403
