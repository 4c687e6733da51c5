"""OpenLineage helpers (optional dependency: everything is imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAMESPACE_SCHEME = "tablestore"


def dataset_namespace(instance_name: str) -> str:
    """OpenLineage namespace of a Tablestore instance: ``tablestore://<instance>``."""
    return f"{NAMESPACE_SCHEME}://{instance_name}"


def path_dataset(path: str) -> tuple[str, str]:
    """The OpenLineage ``(namespace, name)`` of a file or object-store path: ``("file", "/abs/path")`` for a
    local path, ``("s3://bucket", "key/prefix")`` for a URI."""
    if "://" not in path:
        return "file", path
    scheme, _, rest = path.partition("://")
    bucket, _, name = rest.partition("/")
    return f"{scheme}://{bucket}", name


def table_lineage(
    *, inputs: Sequence[tuple[str, str]] = (), outputs: Sequence[tuple[str, str]] = (),
    path_outputs: Sequence[str] = (),
) -> Any:
    """``OperatorLineage`` for ``(instance, table)`` pairs as datasets ``tablestore://<instance>/<table>``, plus
    file or object-store paths as outputs; None when the OpenLineage provider is not installed."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    return OperatorLineage(
        inputs=[Dataset(namespace=dataset_namespace(instance), name=table) for instance, table in inputs],
        outputs=[*(Dataset(namespace=dataset_namespace(instance), name=table) for instance, table in outputs),
                 *(Dataset(namespace=namespace, name=name) for namespace, name in map(path_dataset, path_outputs))],
    )


def option_value(args: Sequence[Any] | None, flag: str) -> str | None:
    """The value after ``flag`` in a command line (None when absent or unset)."""
    items = [str(a) for a in args or ()]
    for i, item in enumerate(items[:-1]):
        if item == flag and items[i + 1] not in ("", "None"):
            return items[i + 1]
    return None
