"""The official ``tablestore`` SDK 6.4.8 (a test oracle in its own venv) against a real emulator process.

The scenario (``sdk_scenario.py``) runs inside ``.oracle-venv`` and asserts everything itself: DDL, every
value type, updates with every op, deletes, conditions, batch writes with a failing row, batch gets, paginated
ranges, error codes, auto-increment keys, read filters, versions and time ranges, UpdateTable, the aiohttp
client, V4 signing, byte-identical PlainBuffer against the SDK's encoder, and the project's
generated protobuf modules under the SDK's protobuf 5.x. It runs once with the SDK's pure-Python PlainBuffer
decoder and once with its C parser (no fallback), which is the strictest CRC check we have.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.oracle import run_in_oracle

SCENARIO = Path(__file__).with_name("sdk_scenario.py")
EXPECTED_STEPS = {
    "ddl_create_describe_list",
    "put_get_every_type",
    "update_row_all_ops",
    "delete_row",
    "conditions",
    "batch_write_with_failing_row",
    "get_range_pagination",
    "compute_split_points_by_size",
    "errors",
    "delete_tables",
    "project_protobuf_modules_under_sdk_protobuf",
    "auto_increment_filters_versions_update_table",
    "async_client",
    "signing_v4_and_sts",
    "codec_matches_sdk",
}

pytestmark = pytest.mark.oracle


def _run(emulator: EmulatorProcess, mode: str) -> dict[str, Any]:
    done = run_in_oracle(
        SCENARIO,
        [emulator.endpoint, emulator.instance, emulator.access_key_id, emulator.access_key_secret, mode],
        timeout=300,
    )
    assert done.returncode == 0, f"scenario crashed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert emulator.access_key_secret not in done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.parametrize("mode", ["python", "native"])
def test_official_sdk_against_emulator(oracle_python: Path, sdk_emulator: EmulatorProcess, mode: str) -> None:
    summary = _run(sdk_emulator, mode)
    steps = summary["steps"]
    assert set(steps) == EXPECTED_STEPS
    failed = {name: detail for name, detail in steps.items() if detail != "ok"}
    assert not failed, "SDK scenario steps failed:\n" + "\n".join(f"--- {k}\n{v}" for k, v in failed.items())
    facts = summary["facts"]
    assert facts["protobuf"].startswith("5."), facts  # the SDK pins protobuf<6: our pb2 modules work there
    assert facts["limit_pages"] >= 4
    assert facts["server_page_rows"] == 10
    assert facts["codec_rows_compared"] == 600
    assert facts["split_points"] >= 10


def _plain(value: Any) -> Any:
    return {"hex": value.hex()} if isinstance(value, bytes) else value


def test_project_client_and_sdk_read_each_others_rows(oracle_python: Path, sdk_emulator: EmulatorProcess) -> None:
    from airflow_tablestore.client import TableClient
    from airflow_tablestore.client.model import (
        Column,
        PrimaryKeyColumn,
        PrimaryKeyType,
        TableOptions,
        TableSchema,
    )

    table = "interop"
    now_ms = int(time.time() * 1000) - 60_000
    ours = [
        ((("s", "ours"), ("b", b"\x00"), ("i", 1)), (Column("n", 1), Column("text", "é and 漢"), Column("ok", True))),
        ((("s", "ours"), ("b", b"\x00"), ("i", 2)), (Column("f", 2.5), Column("blob", b"\x00\xff"))),
        (
            (("s", "ours"), ("b", b"\x01"), ("i", 1)),
            (Column("v", "new", now_ms + 1), Column("v", "old", now_ms), Column("n", -(2**63))),
        ),
    ]
    with TableClient(**sdk_emulator.client_kwargs) as client:
        client.create_table(
            TableSchema(
                table,
                (
                    PrimaryKeyColumn("s", PrimaryKeyType.STRING),
                    PrimaryKeyColumn("b", PrimaryKeyType.BINARY),
                    PrimaryKeyColumn("i", PrimaryKeyType.INTEGER),
                ),
                options=TableOptions(max_versions=3),
            )
        )
        for pk, columns in ours:
            client.put_row(table, pk, columns)
        written = {pk: client.get_row(table, pk, max_versions=3) for pk, _ in ours}

        done = run_in_oracle(
            Path(__file__).with_name("sdk_interop.py"),
            [sdk_emulator.endpoint, sdk_emulator.instance, sdk_emulator.access_key_id,
             sdk_emulator.access_key_secret, table, str(now_ms)],
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen_by_sdk = json.loads(done.stdout.strip().splitlines()[-1])["read"]

        # The SDK sees exactly what our client stored (values, types, versions, order).
        expected = []
        for pk, _ in ours:
            row = written[pk]
            assert row is not None
            expected.append(
                [[[n, _plain(v)] for n, v in row.primary_key],
                 [[c.name, _plain(c.value), c.timestamp] for c in row.columns]]
            )
        assert seen_by_sdk == expected
        assert [c[1] for c in seen_by_sdk[2][1] if c[0] == "v"] == ["new", "old"]

        # And our client sees what the SDK did.
        sdk_row = client.get_row(table, (("s", "sdk"), ("b", b"\x01\x02"), ("i", -5)))
        assert sdk_row is not None
        assert {c.name: c.value for c in sdk_row.columns} == {
            "at": "versioned", "blob": b"\xfe", "f": -0.25, "n": 2**40, "ok": False, "text": "from the SDK",
        }
        assert sdk_row.columns[0].timestamp == now_ms  # "at" sorts first
        incremented = client.get_row(table, ours[0][0])
        assert incremented is not None and incremented.get("n") == 11
        assert client.get_row(table, ours[1][0]) is None
        client.delete_table(table)
