"""Airflow assets of the Tablestore provider (importing the package checks the installed Airflow first)."""

from airflow_tablestore import version_compat  # noqa: F401 - one clear line on a missing or too old Airflow
