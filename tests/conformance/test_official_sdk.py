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
from pathlib import Path
from typing import Any

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess
from benchmarks.oracle import run_in_oracle

SCENARIO = Path(__file__).with_name("sdk_scenario.py")
EXPECTED_STEPS = {
    "ddl_create_describe_list",
    "put_get_every_type",
    "update_row_all_ops",
    "delete_row",
    "conditions",
    "batch_write_with_failing_row",
    "get_range_pagination",
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
