"""Deprecated import paths: module ``__getattr__`` hooks that resolve moved names with a warning.

A public name that moved keeps working at its old path for one release: ``moved_names(__name__, {...})``
returns a module-level ``__getattr__`` that imports the name from its new home and warns once per access.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved_names(module: str, moves: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``moves``: old attribute name → ``"new.module:new_name"``."""

    def __getattr__(name: str) -> Any:
        target = moves.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, _, new_name = target.partition(":")
        warnings.warn(
            f"{module}.{name} moved to {new_module}.{new_name}; the old name is removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
