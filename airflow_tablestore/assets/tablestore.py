"""The ``tablestore`` asset URI scheme: ``tablestore://<instance>/<table>`` names one table of one instance.

Registered in provider info (``asset-uris``), so Airflow normalises and validates such URIs wherever an
``Asset`` is declared, and OpenLineage sees the same dataset names as the operators' lineage facets
(namespace ``tablestore://<instance>``, name ``<table>``). Instance names are case-insensitive (they are host
names in the endpoint) and are lower-cased; table names are case-sensitive and kept.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

from airflow.sdk import Asset

from airflow_tablestore.client.table.arguments import TABLE_NAME_RULE

SCHEME = "tablestore"
INSTANCE_RE = re.compile(r"^[a-z][a-z0-9-]{1,14}[a-z0-9]$")
"""3-16 characters: a letter first, then letters, digits or hyphens, not ending with a hyphen."""


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Validate and normalise ``tablestore://<instance>/<table>`` (Airflow calls this for every such Asset)."""
    instance = (uri.netloc or "").lower()
    if not INSTANCE_RE.match(instance):
        raise ValueError(f"{SCHEME}:// URI needs a Tablestore instance name as its host (3-16 letters, digits "
                         f"or hyphens, starting with a letter), got {uri.netloc!r}")
    table = uri.path.strip("/")
    if not TABLE_NAME_RULE.fullmatch(table):
        raise ValueError(f"{SCHEME}:// URI needs exactly one table name as its path "
                         f"(tablestore://<instance>/<table>), got {uri.path!r}")
    if uri.query or uri.fragment:
        raise ValueError(f"{SCHEME}:// URIs take no query string or fragment")
    return uri._replace(netloc=instance, path=f"/{table}")


def create_asset(*, instance: str, table: str, extra: dict[str, Any] | None = None) -> Asset:
    """The Asset of ``table`` on ``instance``."""
    uri = sanitize_uri(urlsplit(f"{SCHEME}://{instance}/{table}")).geturl()
    return Asset(uri=uri, extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The OpenLineage dataset of a ``tablestore://`` Asset (the names the operators' facets use)."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    parts = urlsplit(asset.uri)
    return Dataset(namespace=f"{SCHEME}://{parts.netloc}", name=parts.path.lstrip("/"))
