"""Which Airflow the provider runs on: the supported-version check and the few shims that bridge 3.2 and 3.3.

Importing this module (every Airflow-layer package does, first) fails with one actionable line when Airflow is
missing or older than :data:`MIN_AIRFLOW_VERSION`, instead of an ``ImportError`` from deep inside a DAG parse.
The shims use feature detection, not version numbers: a task SDK that has the async API is used as is.
"""

from __future__ import annotations

import asyncio
from typing import Any

MIN_AIRFLOW_VERSION = (3, 2, 0)
"""Oldest supported Airflow: the declarative connection form (``conn-fields``) and the ``airflow.sdk`` names
the operators, sensor and hooks import exist from 3.2.0 (tested by ``make test-compat``)."""


class UnsupportedAirflowError(RuntimeError):
    """Airflow is not installed or is older than the provider supports."""


def _version_tuple(version: str) -> tuple[int, int, int]:
    from packaging.version import Version

    release = Version(version).release
    return (release + (0, 0, 0))[:3]  # type: ignore[return-value]


def check_airflow_version(version: str) -> tuple[int, int, int]:
    """The ``(major, minor, micro)`` of ``version``; raises :class:`UnsupportedAirflowError` below the minimum."""
    found = _version_tuple(version)
    if found < MIN_AIRFLOW_VERSION:
        minimum = ".".join(map(str, MIN_AIRFLOW_VERSION))
        raise UnsupportedAirflowError(
            f"airflow-provider-tablestore needs Apache Airflow >= {minimum}, but Airflow {version} is installed: "
            f"upgrade Airflow (pip install 'apache-airflow>={minimum}') or use only the client and emulator "
            "(airflow_tablestore.client, airflow_tablestore.emulator), which do not need Airflow"
        )
    return found


def _installed_airflow_version() -> tuple[int, int, int]:
    try:
        from airflow import __version__
    except ImportError:
        raise UnsupportedAirflowError(
            "the Airflow layer of airflow-provider-tablestore (hooks, operators, sensors, triggers) needs Apache "
            "Airflow: pip install 'airflow-provider-tablestore[airflow]'"
        ) from None
    return check_airflow_version(__version__)


AIRFLOW_VERSION = _installed_airflow_version()


async def amask_secret(secret: str) -> None:
    """Register ``secret`` with the log masker from async code (a trigger) without blocking the event loop.

    Task SDK >= 1.3.2 (Airflow 3.3.2) has ``amask_secret``; before it, the sync ``mask_secret`` runs in a
    thread, where its call to the supervisor cannot deadlock the triggerer's event loop.
    """
    from airflow.sdk import log as sdk_log

    native = getattr(sdk_log, "amask_secret", None)
    if native is not None:
        await native(secret)
    else:
        await asyncio.to_thread(sdk_log.mask_secret, secret)


async def aextra_dejson(conn: Any) -> dict[str, Any]:
    """``conn.extra_dejson`` from async code: ``aextra_dejson()`` where the task SDK has it (>= 1.3.2), else the
    sync property in a thread (it masks sensitive extras, which talks to the supervisor)."""
    native = getattr(conn, "aextra_dejson", None)
    if native is not None:
        extra: dict[str, Any] = await native()
        return extra
    return await asyncio.to_thread(lambda: dict(conn.extra_dejson))
