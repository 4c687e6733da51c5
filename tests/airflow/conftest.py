"""Airflow-layer test fixtures (see tablestore_airflow_testing.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tablestore_airflow_testing import *  # noqa: E402,F403
