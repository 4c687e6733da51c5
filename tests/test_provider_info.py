"""Provider registration: schema-valid provider info, installed entry point, importable classes."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

import airflow_tablestore
from airflow_tablestore.get_provider_info import get_provider_info


def _airflow_schema(name: str) -> dict:
    spec = importlib.util.find_spec("airflow")  # locate the package without importing (and configuring) it
    assert spec is not None and spec.origin is not None
    return json.loads((Path(spec.origin).parent / name).read_text())


def test_provider_info_validates_against_airflow_schema() -> None:
    info = get_provider_info()
    jsonschema.validate(info, _airflow_schema("provider_info.schema.json"))
    assert info["package-name"] == "airflow-provider-tablestore"
    assert info["versions"] == [airflow_tablestore.__version__]


def test_connection_type_declares_fields_and_behaviour() -> None:
    (conn_type,) = get_provider_info()["connection-types"]
    assert conn_type["connection-type"] == "tablestore"
    fields = conn_type["conn-fields"]
    assert {"instance_name", "region", "sts_token", "connect_timeout", "read_timeout"} <= set(fields)
    assert fields["sts_token"]["schema"]["format"] == "password"
    # The per-connection-type sub-schema of provider.yaml (conn-fields, ui-field-behaviour) accepts it.
    yaml_schema = _airflow_schema("provider.yaml.schema.json")
    conn_schema = yaml_schema["properties"]["connection-types"]["items"]
    jsonschema.validate(conn_type, conn_schema)
    behaviour = conn_type["ui-field-behaviour"]
    assert behaviour["relabeling"] == {"host": "Endpoint", "login": "AccessKey ID", "password": "AccessKey Secret"}
    jsonschema.validate(
        {"hidden_fields": behaviour["hidden-fields"], "relabeling": behaviour["relabeling"],
         "placeholders": behaviour["placeholders"]},
        _airflow_schema("customized_form_field_behaviours.schema.json"),
    )


def test_entry_point_is_installed() -> None:
    points = importlib.metadata.entry_points(group="apache_airflow_provider")
    ours = [ep for ep in points if ep.value == "airflow_tablestore.get_provider_info:get_provider_info"]
    assert len(ours) == 1
    assert ours[0].load()() == get_provider_info()
    assert importlib.metadata.version("airflow-provider-tablestore") == airflow_tablestore.__version__


def test_declared_modules_and_hook_class_import() -> None:
    info = get_provider_info()
    modules = [m for key in ("hooks", "operators", "sensors", "triggers") for item in info[key]
               for m in item["python-modules"]]
    for module in modules:
        importlib.import_module(module)
    module_name, _, class_name = info["connection-types"][0]["hook-class-name"].rpartition(".")
    hook_class = getattr(importlib.import_module(module_name), class_name)
    assert hook_class.conn_type == "tablestore"
    assert hook_class.default_conn_name == "tablestore_default"
    assert hook_class.conn_name_attr == "tablestore_conn_id"


def test_older_python_is_refused_in_one_line() -> None:
    """pip refuses the install (requires-python); importing the source on Python 3.10 says why in one line."""
    import subprocess

    from compat.envs import find_python

    try:
        python = find_python("3.10")
    except RuntimeError:
        pytest.skip("no Python 3.10 on this machine")
    root = Path(airflow_tablestore.__file__).resolve().parents[1]
    result = subprocess.run([python, "-c", f"import sys; sys.path.insert(0, {str(root)!r}); import airflow_tablestore"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: airflow-provider-tablestore needs Python >= 3.11, this is Python 3.10")
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"] == ">=3.11"


def test_description_is_plain_text() -> None:
    """`airflow providers list` prints it as is: no RST link markup."""
    description = get_provider_info()["description"]
    assert not any(mark in description for mark in ("`", "<http", "__"))
