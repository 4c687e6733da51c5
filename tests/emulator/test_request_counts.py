"""The control op ``requests``: requests answered per API path, read and reset (what the scale benchmark counts)."""

from __future__ import annotations

from emu_wire import Wire, create_table, put, unique

from airflow_tablestore.emulator.testing import EmulatorProcess


def test_counts_each_api_path_and_resets(emulator: EmulatorProcess, wire: Wire) -> None:
    emulator.control.request_counts(reset=True)
    table = create_table(wire, unique("counts"))
    for i in range(3):
        put(wire, table, [("pk", i)], {"a": i})
    counts = emulator.control.request_counts(reset=True)
    assert counts["/CreateTable"] == 1
    assert counts["/PutRow"] == 3
    assert emulator.control.request_counts() == {}  # reset, and control calls are not API requests
