"""Airflow version flags of the provider (kept local on purpose, like every provider's own copy)."""

from __future__ import annotations


def _airflow_version() -> tuple[int, int, int]:
    from airflow import __version__
    from packaging.version import Version

    release = Version(__version__).release
    return (release + (0, 0, 0))[:3]  # type: ignore[return-value]


AIRFLOW_VERSION = _airflow_version()
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= (3, 2, 0)
"""Airflow >= 3.2 reads the connection form from ``conn-fields``/``ui-field-behaviour`` in provider info."""
