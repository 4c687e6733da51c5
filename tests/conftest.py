"""Root of the test suite: puts ``tests/`` on ``sys.path`` so that every test directory can import the shared
helper modules that live here (``replication_helpers``)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
