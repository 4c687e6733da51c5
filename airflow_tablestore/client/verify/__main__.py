"""The command ``python -m airflow_tablestore.client.verify``: compare a table and its replica, exit 0/1/2.

Credentials come the way the Spark consumer reads them (:mod:`airflow_tablestore.client.credentials`):
``TABLESTORE_ENDPOINT``, ``TABLESTORE_INSTANCE``, ``TABLESTORE_ACCESS_KEY_ID``, ``TABLESTORE_ACCESS_KEY_SECRET``
[, ``TABLESTORE_STS_TOKEN``, ``TABLESTORE_REGION``], or ``--credentials-file``; a replica on another instance
takes ``TABLESTORE_SINK_*`` (or the file's ``sink`` object). Exit 0: equal; 1: different (the report is
printed); 2: a usage, credentials or connection error (one line naming the cause). Secrets are never printed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from airflow_tablestore.client import credentials
from airflow_tablestore.client.errors import TablestoreError
from airflow_tablestore.client.replica import FENCE_COLUMN
from airflow_tablestore.client.verify.compare import verify_replica

EQUAL, DIFFERENT, ERROR = 0, 1, 2
PROG = "python -m airflow_tablestore.client.verify"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # one line with the cause (argparse prints the whole usage first)
        self.exit(ERROR, f"{self.prog}: error: {message} (see --help)\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    """The command's arguments (no secrets: those come from the environment or a file)."""
    p = _Parser(prog=PROG, description="Compare a Tablestore table and its replica cell for cell. "
                "Exit 0 when equal, 1 when different (with a report), 2 on a usage or connection error.")
    p.add_argument("--source-table", required=True, help="the replicated table")
    p.add_argument("--replica-table", required=True, help="its replica")
    p.add_argument("--all-versions", action="store_true",
                   help="compare every kept version of every cell (default: the newest version only)")
    p.add_argument("--fence-column", default=FENCE_COLUMN,
                   help=f"the replica's fence column, not compared; its tombstones are deleted rows "
                        f"(default {FENCE_COLUMN!r}; '' for a replica without a fence)")
    p.add_argument("--max-differences", type=_count, default=10, help="rows listed in the report (default 10)")
    p.add_argument("--page-size", type=_positive, default=None,
                   help="rows per GetRange page (default: the service's page); memory holds one page per table")
    p.add_argument("--credentials-file", default=None,
                   help="JSON credentials file ({\"source\": {...}, \"sink\": {...}}) instead of TABLESTORE_* "
                        "variables")
    p.add_argument("--verbose", action="store_true", help="log the client's retries on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    args = parser().parse_args(argv)
    # without --verbose, stderr holds only the one-line cause of a failure (retries stay quiet)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(message)s",
                        stream=sys.stderr)
    try:
        source = credentials.load(credentials_file=args.credentials_file, section="source",
                                  env_prefix=credentials.SOURCE_PREFIX)
        replica = credentials.load(credentials_file=args.credentials_file, section="sink",
                                   env_prefix=credentials.SINK_PREFIX, fallback=source)
        with source.table_client() as source_client, replica.table_client() as replica_client:
            report = verify_replica(source_client, args.source_table, replica_client, args.replica_table,
                                    all_versions=args.all_versions, fence_column=args.fence_column,
                                    max_differences=args.max_differences, page_size=args.page_size)
    except TablestoreError as exc:
        print(f"{PROG}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return ERROR
    print(report)
    return EQUAL if report.ok else DIFFERENT


if __name__ == "__main__":
    sys.exit(main())
