"""Airflow's ProvidersManager really loads the provider: hook, connection form metadata, version."""

from __future__ import annotations

from typing import Any

import pytest

import airflow_tablestore


@pytest.fixture(scope="module")
def manager() -> Any:
    from airflow.providers_manager import ProvidersManager

    return ProvidersManager()


def test_hook_registered_for_connection_type(manager: Any) -> None:
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hook = ProvidersManagerTaskRuntime().hooks["tablestore"]
    assert hook is not None
    assert hook.hook_class_name == "airflow_tablestore.hooks.table.TablestoreHook"
    assert hook.connection_id_attribute_name == "tablestore_conn_id"
    assert hook.package_name == "airflow-provider-tablestore"
    assert manager.providers["airflow-provider-tablestore"].version == airflow_tablestore.__version__


def test_connection_form_metadata_loaded(manager: Any) -> None:
    behaviour = manager.field_behaviours["tablestore"]
    assert behaviour["relabeling"]["host"] == "Endpoint"
    assert set(behaviour["hidden_fields"]) == {"schema", "port"}
    widgets = manager.connection_form_widgets
    assert widgets["extra__tablestore__sts_token"].is_sensitive is True  # rendered and stored as a secret
    assert widgets["extra__tablestore__instance_name"].is_sensitive is False
    assert widgets["extra__tablestore__region"].field["schema"]["title"] == "Region"
