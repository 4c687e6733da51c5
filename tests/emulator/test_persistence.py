"""Acknowledged writes survive SIGTERM and SIGKILL restarts (same data directory)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from emu_wire import Wire, create_table, get, get_range, pb, put

from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.testing import EmulatorProcess


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_restart_keeps_acknowledged_writes(tmp_path: Path, sig: int) -> None:
    emu = EmulatorProcess(data_dir=tmp_path)
    try:
        emu.start()
        w = Wire(emu.endpoint)
        create_table(w, "persist", stream_hours=24)
        req = pb.BatchWriteRowRequest()
        t = req.tables.add(table_name="persist")
        for i in range(150):
            r = t.rows.add(type=pb.PUT, row_change=encode_row([("pk", i)], [("v", i, None, None)]))
            r.condition.row_existence = 0
        assert all(r.is_ok for r in w.call("BatchWriteRow", req).tables[0].rows)
        put(w, "persist", [("pk", 1000)], {"last": "yes"})
        code = emu.stop(sig)
        if sig == signal.SIGTERM:
            assert code == 0
        emu.start()
        w = Wire(emu.endpoint)
        assert "persist" in w.call("ListTable", b"").table_names
        rows, _ = get_range(w, "persist", [("pk", INF_MIN)], [("pk", INF_MAX)], limit=40)
        assert [r.pk[0][1] for r in rows] == list(range(40))
        row = get(w, "persist", [("pk", 1000)])
        assert row is not None and row.cells[0].value == "yes"
        assert emu.control.state()["stream_head_seq"] == 151
        put(w, "persist", [("pk", 1001)], {"after": "restart"})
        assert emu.control.state()["stream_head_seq"] == 152  # seqs are never reused
    finally:
        emu.close()
    store = Store(tmp_path / "emulator.sqlite3")
    try:
        assert store.stream.head_seq == 152
        info = store.tables.get("persist")
        assert info is not None and info.stream_enabled
    finally:
        store.close()
