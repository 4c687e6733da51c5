"""OpenLineage helpers (optional dependency: everything is imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAMESPACE_SCHEME = "tablestore"


def dataset_namespace(instance_name: str) -> str:
    """OpenLineage namespace of a Tablestore instance: ``tablestore://<instance>``."""
    return f"{NAMESPACE_SCHEME}://{instance_name}"


def table_lineage(
    *, inputs: Sequence[tuple[str, str]] = (), outputs: Sequence[tuple[str, str]] = ()
) -> Any:
    """``OperatorLineage`` for ``(instance, table)`` pairs as datasets ``tablestore://<instance>/<table>``;
    None when the OpenLineage provider is not installed."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    return OperatorLineage(
        inputs=[Dataset(namespace=dataset_namespace(instance), name=table) for instance, table in inputs],
        outputs=[Dataset(namespace=dataset_namespace(instance), name=table) for instance, table in outputs],
    )
