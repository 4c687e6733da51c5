"""Deprecated alias of :mod:`airflow_tablestore.client.tunnel_worker` (renamed; kept for one release).

``import airflow_tablestore.client.worker`` and its submodules (``.worker``, ``.channel``, ``.config``, ...)
still work and resolve to the same module objects under ``tunnel_worker``, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
import sys
import warnings

_NEW = "airflow_tablestore.client.tunnel_worker"
_SUBMODULES = {
    "channel": f"{_NEW}.channel",
    "checkpointer": f"{_NEW}.checkpointer",
    "config": f"{_NEW}.config",
    "metrics": f"{_NEW}.metrics",
    "processor": f"{_NEW}.processor",
    "worker": f"{_NEW}.worker",
    "state": "airflow_tablestore.client.tunnel_session",
}

warnings.warn(
    f"airflow_tablestore.client.worker is deprecated; import from {_NEW} instead",
    DeprecationWarning,
    stacklevel=2,
)

for _name, _target in _SUBMODULES.items():
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(_target)
    globals()[_name] = sys.modules[_target]

from airflow_tablestore.client.tunnel_worker import *  # noqa: E402,F403
from airflow_tablestore.client.tunnel_worker import __all__  # noqa: E402,F401
