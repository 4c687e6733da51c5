"""``TablestorePlugin``: the page's entry in Airflow's navigation and its routes, mounted on the api-server.

Installed with the package through the ``airflow.plugins`` entry point (pyproject.toml): Airflow loads entry-point
plugins in every process, while a provider's ``plugins`` entry is read only with ``lazy_discover_providers``
off. Every process that loads plugins imports this module, so it imports nothing heavy: the FastAPI app
(:mod:`.routes`) is imported on the first request the api-server hands it.
"""

from __future__ import annotations

import base64
from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/tablestore"

_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="{colour}" stroke-width="2" '
    'stroke-linecap="round" stroke-linejoin="round"><ellipse cx="12" cy="5" rx="8" ry="3"/>'
    '<path d="M4 5v6c0 1.7 3.6 3 8 3s8-1.3 8-3V5"/><path d="M4 11v6c0 1.7 3.6 3 8 3"/>'
    '<path d="M15 18h6m-2-2 2 2-2 2"/></svg>'
)


def _icon(colour: str) -> str:
    """A data URI: the icon needs no route of its own (every route of the page requires a login)."""
    svg = _ICON.format(colour=colour).encode()
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode()


class _RoutesOnFirstRequest:
    """The ASGI app of :mod:`.routes`, imported when the api-server first routes a request to it."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from airflow_tablestore.ui.routes import app

        await app(scope, receive, send)


class TablestorePlugin(AirflowPlugin):
    """The "Tablestore" page: Browse > Tablestore in Airflow's UI, served by the api-server under /tablestore/."""

    name = "tablestore"
    fastapi_apps = [{"app": _RoutesOnFirstRequest(), "url_prefix": URL_PREFIX, "name": "Tablestore"}]
    external_views = [{
        "name": "Tablestore",
        "href": f"{URL_PREFIX}/",
        "url_route": "tablestore",
        "destination": "nav",
        "category": "browse",
        "icon": _icon("#64748b"),
        "icon_dark_mode": _icon("#cbd5e1"),
    }]
