"""Links from a task to the Tablestore console: its instance, and the table it works on.

Airflow 3 computes a task's links in the worker when the task ends and keeps them in XCom, so a link reads the
rendered operator and its connection (no network call). The console's addresses are
``https://otsnext.console.aliyun.com/<region>/<instance>/list`` (an instance's tables) and
``.../<region>/<instance>/<table>/dataManage`` (a table; its tunnels are on the same page's *Tunnels* tab, whose
own address we could not confirm). The region is the task's or connection's ``region``, else the second label of
an Alibaba Cloud endpoint (``https://<instance>.<region>.ots.aliyuncs.com``). With neither (the emulator) there
is no console, and the link is empty: Airflow then shows the button disabled.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

    from airflow_tablestore.client.settings import ConnectionSettings

CONSOLE = "https://otsnext.console.aliyun.com"
log = logging.getLogger(__name__)
_REGION = re.compile(r"^[a-z]{2,}-[a-z0-9-]+$")


def region_of(settings: ConnectionSettings) -> str | None:
    """The console region of a connection: its ``region``, else the one an Alibaba Cloud endpoint names."""
    if settings.region:
        return settings.region
    host = urlsplit(settings.endpoint).hostname or ""
    labels = host.split(".")
    if host.endswith(".aliyuncs.com") and len(labels) >= 4 and _REGION.match(labels[1]):
        return labels[1]
    return None


def instance_url(settings: ConnectionSettings) -> str:
    """The console page of the connection's instance; ``""`` where there is no console (the emulator)."""
    region = region_of(settings)
    if region is None:
        return ""
    return f"{CONSOLE}/{quote(region)}/{quote(settings.instance_name)}/list"


def table_url(settings: ConnectionSettings, table_name: str) -> str:
    """The console page of a table; ``""`` where there is no console (the emulator)."""
    instance = instance_url(settings)
    if not instance or not table_name:
        return ""
    return f"{instance.removesuffix('/list')}/{quote(table_name)}/dataManage"


def _settings(operator: Any) -> ConnectionSettings | None:
    # a link must never add a failure of its own (a missing connection already failed the task, in one line)
    try:
        settings: ConnectionSettings = operator.make_hook().get_config()
    except Exception as err:  # noqa: BLE001
        log.debug("no Tablestore console link for %s: %s", getattr(operator, "task_id", operator), err)
        return None
    return settings


class TablestoreInstanceLink(BaseOperatorLink):
    """The Tablestore console page of the task's instance."""

    name = "Tablestore instance"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        settings = _settings(operator)
        return instance_url(settings) if settings else ""


class TablestoreTableLink(BaseOperatorLink):
    """The Tablestore console page of the task's table (``table_name``); tunnels are on its *Tunnels* tab."""

    name = "Tablestore table"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        settings = _settings(operator)
        return table_url(settings, str(getattr(operator, "table_name", "") or "")) if settings else ""


CONSOLE_LINKS = (TablestoreInstanceLink(), TablestoreTableLink())
"""The links of every task that works on one table of one connection."""
