"""The page's routes, mounted by the api-server under ``/tablestore``: the HTML page and its JSON twin.

Both need what Airflow's REST API needs to read connections (``requires_access_connection("GET")``: a valid
token, as a bearer header or the UI's session cookie, and the permission); unauthenticated requests get 401 and
users without the permission 403. The page then shows only the connections the user may read and, for the
consumers and history, only the DAGs the user may read. Read-only: GET routes only.
"""

from __future__ import annotations

import warnings
from typing import Any

with warnings.catch_warnings():
    # Airflow's api_fastapi imports svcs.fastapi, which imports starlette's TestClient and its deprecation warning
    # (Airflow's dependencies, not this package). In the api-server these modules are imported before this one.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_connection

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_tablestore.ui import metadata, overview, render
from airflow_tablestore.ui.plugin import URL_PREFIX

NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

app = FastAPI(title="Tablestore", docs_url=None, redoc_url=None, openapi_url=None)
_read_connections = [Depends(requires_access_connection("GET"))]


def _overview(user: Any, session: Any) -> overview.Overview:
    auth = get_auth_manager()
    conn_ids = [c for c in metadata.connection_ids(session)
                if auth.is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=c), user=user)]
    dag_ids = auth.get_authorized_dag_ids(user=user, method="GET", session=session)
    return overview.build(session, conn_ids, dag_ids)


@app.get("/", response_class=HTMLResponse, dependencies=_read_connections)
def tablestore_page(request: Request, user: GetUserDep, session: SessionDep) -> HTMLResponse:
    """The Tablestore page."""
    root = str(request.scope.get("root_path", ""))
    base = root[:-len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return HTMLResponse(render.page(_overview(user, session), base), headers=NO_STORE)


@app.get("/api/overview", dependencies=_read_connections)
def tablestore_overview(user: GetUserDep, session: SessionDep) -> JSONResponse:
    """The page's content as JSON."""
    return JSONResponse(_overview(user, session).as_dict(), headers=NO_STORE)
