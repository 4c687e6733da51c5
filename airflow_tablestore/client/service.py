"""Deprecated alias of :mod:`airflow_tablestore.client.base_client` (``ServiceClient`` is now ``BaseClient``)."""

from __future__ import annotations

from airflow_tablestore.client.deprecation import moved_names

__getattr__ = moved_names(__name__, {"ServiceClient": "airflow_tablestore.client.base_client:BaseClient"})
