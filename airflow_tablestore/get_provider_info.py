"""Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point.

A plain dict with no Airflow import, so provider discovery stays cheap. The connection form is declared with
``conn-fields``/``ui-field-behaviour`` (the Airflow >= 3.2 declarative form; no hook import needed).
"""

from __future__ import annotations

from typing import Any

from airflow_tablestore import __version__

INTEGRATION = "Alibaba Cloud Tablestore"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description validated by Airflow's ``provider_info.schema.json``."""
    return {
        "package-name": "airflow-provider-tablestore",
        "name": "Alibaba Cloud Tablestore",
        "description": (
            "Alibaba Cloud Tablestore (OTS) tables and Tunnel Service: hooks, operators (tables, "
            "tunnels, a Spark tunnel consumer and the steps of a replication run), a consume-point sensor "
            "and its deferrable trigger, and an AssetWatcher trigger for a tunnel's new changes."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://www.alibabacloud.com/help/en/tablestore/",
                "tags": ["alibaba"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_tablestore.hooks.base",
                    "airflow_tablestore.hooks.table",
                    "airflow_tablestore.hooks.tunnel",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_tablestore.operators.table",
                    "airflow_tablestore.operators.tunnel",
                    "airflow_tablestore.operators.consume",
                    "airflow_tablestore.operators.spark_submit",
                    "airflow_tablestore.operators.replication",
                    "airflow_tablestore.operators.rebuild",
                    "airflow_tablestore.operators.verify",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_tablestore.sensors.tunnel", "airflow_tablestore.sensors.row"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_tablestore.triggers.tunnel",
                    "airflow_tablestore.triggers.row",
                    "airflow_tablestore.triggers.changes",
                ],
            }
        ],
        "extra-links": [
            "airflow_tablestore.links.console.TablestoreInstanceLink",
            "airflow_tablestore.links.console.TablestoreTableLink",
        ],
        "asset-uris": [
            {
                "schemes": ["tablestore"],
                "handler": "airflow_tablestore.assets.tablestore.sanitize_uri",
                "factory": "airflow_tablestore.assets.tablestore.create_asset",
                "to_openlineage_converter": (
                    "airflow_tablestore.assets.tablestore.convert_asset_to_openlineage"
                ),
            }
        ],
        "connection-types": [
            {
                "connection-type": "tablestore",
                "hook-class-name": "airflow_tablestore.hooks.table.TablestoreHook",
                "hook-name": "Alibaba Cloud Tablestore",
                "conn-fields": {
                    "instance_name": {
                        "label": "Instance name",
                        "description": "Tablestore instance name (required).",
                        "schema": {"type": "string", "minLength": 1},
                    },
                    "region": {
                        "label": "Region",
                        "description": "Region id such as cn-hangzhou; enables V4 signing when set.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "sts_token": {
                        "label": "STS token",
                        "description": "Security token of temporary (STS) credentials.",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "connect_timeout": {
                        "label": "Connect timeout (s)",
                        "description": "TCP connect timeout in seconds.",
                        "schema": {"type": ["number", "null"], "exclusiveMinimum": 0},
                    },
                    "read_timeout": {
                        "label": "Read timeout (s)",
                        "description": "Socket read timeout in seconds.",
                        "schema": {"type": ["number", "null"], "exclusiveMinimum": 0},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port"],
                    "relabeling": {
                        "host": "Endpoint",
                        "login": "AccessKey ID",
                        "password": "AccessKey Secret",
                    },
                    "placeholders": {
                        "host": "https://<instance>.<region>.ots.aliyuncs.com",
                        "login": "LTAI...",
                        "instance_name": "my-instance",
                        "region": "cn-hangzhou",
                        "connect_timeout": "10",
                        "read_timeout": "60",
                    },
                },
            }
        ],
    }
