"""Operators that rebuild a past interval's Parquet change-log partitions from a bounded Stream tunnel.

A rerun of an interval the main tunnel already passed (a cleared task, a backfill) cannot read its changes
from that tunnel again. The rebuild leaves the main tunnel alone:

1. :class:`TablestoreCreateRebuildTunnelOperator` creates a Stream tunnel bounded to the run's interval (after
   checking the interval is still in the table's stream retention, :func:`outside_retention`);
2. the Spark consumer (``TablestoreSparkSubmitOperator``) reads it into a staging change log;
3. :class:`TablestoreSwapRebuiltPartitionsOperator` swaps the interval's partitions for the staged ones and
   deletes the rebuild tunnel.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_tablestore.client.changelog import prepare_rebuild, replace_partitions
from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook
from airflow_tablestore.operators.arguments import check_choice, check_non_empty, check_table_name
from airflow_tablestore.operators.base import TablestoreBaseOperator, closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast
from airflow_tablestore.operators.replication import PARTITIONINGS, PLAN_XCOM_KEY


def outside_retention(start: datetime, end: datetime, retention_hours: int, now: datetime) -> str | None:
    """Why [start, end) cannot be re-exported from the stream (it begins before the oldest change the table's
    stream still holds), or None."""
    oldest = now - timedelta(hours=retention_hours)
    if start >= oldest:
        return None
    return (f"the interval [{start.isoformat()}, {end.isoformat()}) starts before the oldest change the "
            f"table's stream still holds ({oldest.isoformat()}, retention {retention_hours} h): its changes "
            "cannot be read again; the change log is left as it was")


def _data_interval(context: Context) -> tuple[datetime, datetime]:
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        raise AirflowFailException("a rebuild needs the run's data interval (a run with a logical date)")
    return start, end


def _check_names(table_name: str, tunnel_name: str, **paths: str) -> None:
    check_table_name("table_name", table_name)
    check_non_empty("tunnel_name", tunnel_name)
    for argument, path in paths.items():  # an empty path would be the worker's working directory
        check_non_empty(argument, path, "a non-empty path or URI")


class TablestoreCreateRebuildTunnelOperator(TablestoreBaseOperator[TablestoreTunnelHook]):
    """Create a Stream tunnel bounded to the run's data interval, to read that interval's changes again.

    Fails at once, changing nothing, when the interval starts before the oldest change the table's stream
    still holds. A rebuild tunnel an earlier attempt left is deleted and created again, and the staging change
    log is emptied each time (the new tunnel reads the interval from its start: what an earlier attempt staged
    would be duplicated) and marked as not swapped in yet (``client.changelog.prepare_rebuild``).

    :param table_name: the source table.
    :param tunnel_name: the main tunnel's name; the rebuild tunnel is ``<tunnel_name>-rebuild-<start>``.
    :param parquet_path: the change log's root; the rebuilt partitions are staged under ``_rebuild/<start>``.
    :param plan_task_id: when set, the branch task that plans the run: this task skips itself unless that task
        chose it (so it can also be downstream of tasks the plan may run instead, and wait for them).
    :param tablestore_conn_id: the source's connection.
    :param region: overrides the connection's region.
    :return: (XCom) ``{"tunnel": <rebuild tunnel name>, "staging": <staging change log>}``, each also pushed
        under its own key (``multiple_outputs``), so later tasks take ``task.output["tunnel"]`` and
        ``task.output["staging"]``.
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "parquet_path")
    ui_color = "#ffb35c"

    def __init__(self, *, table_name: str, tunnel_name: str, parquet_path: str,
                 plan_task_id: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("multiple_outputs", True)
        super().__init__(**kwargs)
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.parquet_path = parquet_path
        self.plan_task_id = plan_task_id

    @closes_hooks
    def execute(self, context: Context) -> dict[str, str]:
        if self.plan_task_id:
            chosen = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=PLAN_XCOM_KEY) or []
            if self.task_id not in chosen:
                raise AirflowSkipException(f"{self.plan_task_id} did not choose a rebuild for this run")
        with fail_fast():
            _check_names(self.table_name, self.tunnel_name, parquet_path=self.parquet_path)
        start, end = _data_interval(context)
        name = f"{self.tunnel_name}-rebuild-{start:%Y%m%dT%H%M%S}"
        tables = TablestoreHook(self.tablestore_conn_id, region=self.region)
        with tables, self.make_hook() as tunnels, fail_fast():
            stream = tables.conn.describe_table(self.table_name).schema.stream
            retention_hours = stream.expiration_hours if stream else 0
            problem = outside_retention(start, end, retention_hours, datetime.now(UTC))
            if problem:
                raise AirflowFailException(problem)
            if tunnels.delete_tunnel(self.table_name, name):
                self.log.info("deleted the rebuild tunnel %s an earlier attempt left", name)
            tunnels.conn.create_tunnel(self.table_name, name, "Stream", stream_start=start, stream_end=end)
        staging = f"{self.parquet_path.rstrip('/')}/_rebuild/{start:%Y%m%dT%H%M%S}"
        prepare_rebuild(staging)  # the new tunnel reads the whole interval: start from an empty staging log
        self.log.info("rebuild tunnel %s created for [%s, %s); the rebuilt partitions are written to %s "
                      "first", name, start.isoformat(), end.isoformat(), staging)
        return {"tunnel": name, "staging": staging}


class TablestoreSwapRebuiltPartitionsOperator(TablestoreBaseOperator[TablestoreTunnelHook]):
    """Replace the run's interval partitions by the rebuilt ones, then delete the staging log and the tunnel.

    Each partition is swapped by a directory rename (atomic on local and HDFS file systems: readers see the
    old or the new partition, never a mix); a partition the rebuild did not write had no changes. Retrying is
    safe: a staging log already swapped in (its marker gone) is not swapped again, and a tunnel already
    deleted is not an error.

    :param table_name: the source table.
    :param tunnel_name: the rebuild tunnel to delete.
    :param parquet_path: the change log's root.
    :param staging_path: the rebuilt change log.
    :param partition_by: the change log's partitioning (``hour`` or ``day``).
    :param tablestore_conn_id: the source's connection.
    :param region: overrides the connection's region.
    :return: (XCom) the replaced partitions (``YYYYMMDDTHH`` or ``YYYYMMDD``).
    """

    hook_class = TablestoreTunnelHook
    template_fields: Sequence[str] = tablestore_template_fields("table_name", "tunnel_name", "parquet_path",
                                                                "staging_path")
    ui_color = "#ffb35c"

    def __init__(self, *, table_name: str, tunnel_name: str, parquet_path: str, staging_path: str,
                 partition_by: str = "hour", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_choice("partition_by", partition_by, PARTITIONINGS)
        self.table_name = table_name
        self.tunnel_name = tunnel_name
        self.parquet_path = parquet_path
        self.staging_path = staging_path
        self.partition_by = partition_by

    @closes_hooks
    def execute(self, context: Context) -> list[str]:
        with fail_fast():
            _check_names(self.table_name, self.tunnel_name, parquet_path=self.parquet_path,
                         staging_path=self.staging_path)
        start, end = _data_interval(context)
        replaced = replace_partitions(self.parquet_path, self.staging_path, start, end, self.partition_by)
        with self.make_hook() as tunnels, fail_fast():
            if not tunnels.delete_tunnel(self.table_name, self.tunnel_name):
                self.log.info("rebuild tunnel %s already deleted", self.tunnel_name)
        self.log.info("rebuilt partitions %s of [%s, %s)", ", ".join(replaced), start.isoformat(),
                      end.isoformat())
        return replaced
