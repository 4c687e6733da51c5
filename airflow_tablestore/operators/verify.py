"""``TablestoreVerifyReplicaOperator``: fail the task unless a replica equals its source table cell for cell."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablestore.client.replica import FENCE_COLUMN
from airflow_tablestore.client.verify.compare import VerifyError
from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.operators.arguments import check_table_name
from airflow_tablestore.operators.base import TablestoreBaseOperator, closes_hooks, tablestore_template_fields
from airflow_tablestore.operators.failures import fail_fast


class ReplicaDiffersError(AirflowFailException):
    """The replica differs from its source; the message is the verifier's report (counts, first differences).
    Not retried: another comparison of the same tables gives the same answer."""


class TablestoreVerifyReplicaOperator(TablestoreBaseOperator[TablestoreHook]):
    """Compare ``source_table`` and its replica ``destination_table`` cell for cell and fail unless they are equal.

    Both tables are streamed in primary-key order, one GetRange page of each in memory
    (:func:`airflow_tablestore.client.verify.compare.verify_replica`, also the command
    ``python -m airflow_tablestore.client.verify``); the replica's fence column is not compared and its
    tombstones are deleted rows, as the replica's readers see them. The replica equals the source only when no
    change reached the source after the replication's cutoff: verify a source that no longer changes.

    :param source_table: the replicated table (on ``tablestore_conn_id``).
    :param destination_table: its replica.
    :param sink_tablestore_conn_id: the replica's connection (default: ``tablestore_conn_id``).
    :param all_versions: compare every kept version of every cell (default), else the newest only.
    :param fence_column: the replica's fence column (the consumer's ``--fence-column``); ``""`` for none.
    :param max_differences: rows listed in the report (all are counted).
    :param page_size: rows per GetRange page (default: the service's page).
    :return: (XCom) the report's counts: ``{"ok", "rows_compared", "equal", "missing", "extra", "differing",
        "tombstones", "differences", ...}``. When the tables differ the task fails with
        :class:`ReplicaDiffersError` carrying the report.
    """

    hook_class = TablestoreHook
    template_fields: Sequence[str] = tablestore_template_fields("sink_tablestore_conn_id", "source_table",
                                                                "destination_table", "fence_column")
    ui_color = "#ff8c3a"

    def __init__(self, *, source_table: str, destination_table: str, sink_tablestore_conn_id: str | None = None,
                 all_versions: bool = True, fence_column: str = FENCE_COLUMN, max_differences: int = 10,
                 page_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(all_versions, bool):
            raise ValueError(f"all_versions must be True or False, got {all_versions!r}")
        if isinstance(max_differences, bool) or not isinstance(max_differences, int) or max_differences < 0:
            raise ValueError(f"max_differences must be an integer >= 0, got {max_differences!r}")
        if page_size is not None and (isinstance(page_size, bool) or not isinstance(page_size, int)
                                      or page_size <= 0):
            raise ValueError(f"page_size must be a positive integer or None, got {page_size!r}")
        self.source_table = source_table
        self.destination_table = destination_table
        self.sink_tablestore_conn_id = sink_tablestore_conn_id
        self.all_versions = all_versions
        self.fence_column = fence_column
        self.max_differences = max_differences
        self.page_size = page_size

    @cached_property
    def sink_hook(self) -> TablestoreHook:
        """The replica's hook (the operator's own hook when it is on the same connection)."""
        if self.sink_tablestore_conn_id and self.sink_tablestore_conn_id != self.tablestore_conn_id:
            return self.make_hook(self.sink_tablestore_conn_id)
        return self.hook

    @closes_hooks
    def execute(self, context: Context) -> dict[str, Any]:
        with fail_fast(VerifyError):
            check_table_name("source_table", self.source_table)
            check_table_name("destination_table", self.destination_table)
            report = self.hook.verify_replica(
                self.source_table, self.destination_table, replica_hook=self.sink_hook,
                all_versions=self.all_versions, fence_column=self.fence_column or "",
                max_differences=self.max_differences, page_size=self.page_size)
        if not report.ok:
            raise ReplicaDiffersError(str(report))
        self.log.info("%s (%d tombstones skipped; pages read: %d source, %d replica)", report.summary(),
                      report.tombstones, report.source_pages, report.replica_pages)
        return report.to_dict()
