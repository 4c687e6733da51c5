"""OpenLineage helpers (optional dependency: everything is imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAMESPACE_SCHEME = "tablestore"


def dataset_namespace(instance_name: str) -> str:
    """OpenLineage namespace of a Tablestore instance: ``tablestore://<instance>``."""
    return f"{NAMESPACE_SCHEME}://{instance_name}"


def table_lineage(instance_name: str, *, inputs: Sequence[str] = (), outputs: Sequence[str] = ()) -> Any:
    """``OperatorLineage`` with datasets ``tablestore://<instance>/<table>``, or None without OpenLineage."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    namespace = dataset_namespace(instance_name)
    return OperatorLineage(
        inputs=[Dataset(namespace=namespace, name=name) for name in inputs],
        outputs=[Dataset(namespace=namespace, name=name) for name in outputs],
    )
