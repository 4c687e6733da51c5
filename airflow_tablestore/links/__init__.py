"""Operator extra links: buttons on a task's page that open the Tablestore console (importing the package checks
the installed Airflow first)."""

from airflow_tablestore import version_compat  # noqa: F401 - one clear line on a missing or too old Airflow
