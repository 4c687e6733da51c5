"""Which PlainBuffer decoder runs: the compiled extension (``_speedups``) when importable, else pure Python.

The one facade of the native code: ``_speedups`` (``_speedups.c``, ``_arrow.c`` over the headers ``_parse.h`` and
``_records.h``) holds the compiled decoder and the Arrow builders the Spark modules use, and nothing imports it but
this module. It is built when the package is installed from source on a machine with a C compiler (and
ships in wheels); without it everything works the same, only slower. :data:`IMPLEMENTATION` says which path is
in use (``"c"`` or ``"python"``) and the
choice is logged once at debug level. The environment variable ``TABLESTORE_PLAINBUFFER`` steers it:

* unset, empty or ``auto``: the compiled decoder if it imports, pure Python otherwise;
* ``python``: pure Python even where the compiled module exists (debugging, differential tests);
* ``c``: the compiled decoder or an ``ImportError`` at import (to make sure a build did not silently fail).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import Any

__all__ = ["ENV_VAR", "IMPLEMENTATION", "compiled_module"]

log = logging.getLogger(__name__)

ENV_VAR = "TABLESTORE_PLAINBUFFER"


def _import_compiled() -> ModuleType | None:
    choice = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
    if choice not in ("auto", "c", "python"):
        raise ValueError(f"{ENV_VAR}={choice!r}: expected 'auto', 'c' or 'python'")
    if choice == "python":
        return None
    try:
        from airflow_tablestore.client.plainbuffer import _speedups  # type: ignore[attr-defined]
    except ImportError:
        if choice == "c":
            raise
        return None
    return _speedups


_compiled: Any = _import_compiled()

IMPLEMENTATION: str = "c" if _compiled is not None else "python"
"""``"c"`` when the compiled decoder is in use, ``"python"`` otherwise."""

log.debug(
    "PlainBuffer decoder: %s",
    f"compiled ({_compiled.__file__})" if _compiled is not None else "pure Python",
)


def compiled_module() -> Any:
    """The compiled ``_speedups`` module, or ``None`` (not built, or ``TABLESTORE_PLAINBUFFER=python``).

    Its decoding functions are set up by :mod:`~airflow_tablestore.client.plainbuffer.decode` on import; its Arrow
    builders return raw buffers that ``spark/arrow/values.py`` and ``spark/arrow/changes.py`` wrap in pyarrow arrays.
    """
    return _compiled
