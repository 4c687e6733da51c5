"""The ``tablestore://<instance>/<table>`` asset URI scheme, as Airflow itself applies it to Assets."""

from __future__ import annotations

import pytest


def test_airflow_normalises_tablestore_assets() -> None:
    from airflow.sdk import Asset

    assert Asset("tablestore://MyInstance/orders").uri == "tablestore://myinstance/orders"
    assert Asset("tablestore://myinstance/orders/").uri == "tablestore://myinstance/orders"


@pytest.mark.parametrize("uri", [
    "tablestore://x/orders",            # instance name too short
    "tablestore://1nst/orders",         # must start with a letter
    "tablestore://inst-/orders",        # must not end with a hyphen
    "tablestore://inst",                # no table
    "tablestore://inst/a/b",            # one table, not a path
    "tablestore://inst/bad-name",       # not a table name
    "tablestore://inst/orders?v=1",     # no query
])
def test_malformed_tablestore_assets_are_refused(uri: str) -> None:
    from airflow.sdk import Asset

    with pytest.raises(ValueError, match="tablestore://"):
        Asset(uri)


def test_factory_and_lineage_names_match_the_operators() -> None:
    from airflow_tablestore.assets.tablestore import convert_asset_to_openlineage, create_asset
    from airflow_tablestore.operators._lineage import dataset_namespace

    asset = create_asset(instance="Prod-Inst", table="orders", extra={"interval": "x"})
    assert asset.uri == "tablestore://prod-inst/orders" and asset.extra == {"interval": "x"}
    dataset = convert_asset_to_openlineage(asset, None)
    if dataset is None:  # without the OpenLineage provider the compat facet is a no-op
        pytest.skip("OpenLineage is not installed")
    assert (dataset.namespace, dataset.name) == (dataset_namespace("prod-inst"), "orders")
