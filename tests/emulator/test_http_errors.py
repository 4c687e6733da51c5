"""The HTTP envelope: auth failures, bad headers, methods, sizes, garbage bodies, faults — and nothing lost."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from emu_wire import Wire, WireError, create_table, get, pb, put, unique

from airflow_tablestore.emulator.codec.encode import encode_row
from airflow_tablestore.emulator.testing import EmulatorProcess


def _error(resp: requests.Response) -> tuple[int, str, str]:
    assert resp.headers.get("x-ots-requestid"), "every error carries a request id"
    err = pb.Error.FromString(resp.content)
    return resp.status_code, err.code, err.message


@pytest.fixture
def seeded(wire: Wire) -> str:
    table = create_table(wire, unique("seed"))
    put(wire, table, [("pk", 1)], {"keep": "me"})
    return table


def _still_there(wire: Wire, table: str) -> None:
    row = get(wire, table, [("pk", 1)])
    assert row is not None and row.cells[0].value == "me"


def test_wrong_secret_wrong_key_and_instance(emulator: EmulatorProcess, wire: Wire, seeded: str) -> None:
    bad = Wire(emulator.endpoint, secret="not-the-secret")
    r = bad.raw("/ListTable", b"")
    assert _error(r) == (403, "OTSAuthFailed", "Signature mismatch.")
    r = Wire(emulator.endpoint, akid="someone-else").raw("/ListTable", b"")
    assert _error(r) == (403, "OTSAuthFailed", "The AccessKeyID does not exist.")
    r = Wire(emulator.endpoint, instance="other").raw("/ListTable", b"")
    assert _error(r)[:2] == (403, "OTSAuthFailed")
    _still_there(wire, seeded)


def test_md5_date_and_missing_headers(wire: Wire, seeded: str) -> None:
    body = pb.DescribeTableRequest(table_name=seeded).SerializeToString()
    h = wire.headers(body, "/DescribeTable",
                     **{"x-ots-contentmd5": base64.b64encode(hashlib.md5(b"x").digest()).decode()})
    assert _error(wire.raw("/DescribeTable", body, h)) == (
        403, "OTSAuthFailed", "Mismatch between MD5 value of request body and x-ots-contentmd5 in header.")
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    status, code, message = _error(
        wire.raw("/DescribeTable", body, wire.headers(body, "/DescribeTable", **{"x-ots-date": old})))
    assert (status, code) == (403, "OTSAuthFailed") and message.startswith("Mismatch between system time")
    h = wire.headers(body, "/DescribeTable")
    del h["x-ots-instancename"]
    assert _error(wire.raw("/DescribeTable", body, h)) == (
        400, "OTSParameterInvalid", "Missing header: x-ots-instancename.")
    # Go SDK style date with odd fractional digits is accepted
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + ".9132Z"
    assert wire.raw("/DescribeTable", body,
                    wire.headers(body, "/DescribeTable", **{"x-ots-date": now})).status_code == 200
    _still_there(wire, seeded)


def test_method_unknown_api_and_garbage(emulator: EmulatorProcess, wire: Wire, seeded: str) -> None:
    r = requests.get(emulator.endpoint + "/ListTable", timeout=10)
    assert _error(r)[:2] == (405, "OTSMethodNotAllowed")
    r = wire.raw("/FlyToTheMoon", b"")
    assert _error(r) == (400, "OTSParameterInvalid", "Unsupported operation: FlyToTheMoon.")
    r = wire.raw("/PutRow", b"\xff\xff\xff")
    assert _error(r)[:2] == (400, "OTSParameterInvalid")
    # bad PlainBuffer CRC inside a valid protobuf
    row = bytearray(encode_row([("pk", 1)], [("keep", "lost", None, None)]))
    row[-1] ^= 0x55
    req = pb.PutRowRequest(table_name=seeded, row=bytes(row))
    req.condition.row_existence = 0
    with pytest.raises(WireError) as e:
        wire.call("PutRow", req)
    assert (e.value.status, e.value.code) == (400, "OTSParameterInvalid") and "checksum" in e.value.message
    _still_there(wire, seeded)


def test_oversized_body_is_413(wire: Wire, seeded: str) -> None:
    body = b"\x00" * (5 * 1024 * 1024 + 10)
    r = wire.raw("/PutRow", body)
    assert _error(r) == (413, "OTSRequestBodyTooLarge", "The size of POST data is too large.")
    _still_there(wire, seeded)


def test_success_responses_are_signed(wire: Wire) -> None:
    # Wire.call verifies x-ots-contentmd5/requestid/date/contenttype and the Authorization signature
    ids = set()
    for _ in range(3):
        r = wire.raw("/ListTable", b"")
        assert r.status_code == 200
        ids.add(r.headers["x-ots-requestid"])
    assert len(ids) == 3
    wire.call("ListTable", b"")


def test_fault_injection(emulator: EmulatorProcess, wire: Wire, seeded: str) -> None:
    ctl = emulator.control
    ctl.add_fault("/GetRow", "OTSServerBusy", status=503, message="Server is busy.", count=2)
    for _ in range(2):
        with pytest.raises(WireError) as e:
            get(wire, seeded, [("pk", 1)])
        assert (e.value.status, e.value.code) == (503, "OTSServerBusy")
    _still_there(wire, seeded)
    ctl.add_fault("/GetRow", "OTSTableNotReady", status=404, count=5)
    assert len(ctl.state()["faults"]) == 1
    ctl.clear_faults()
    _still_there(wire, seeded)
    r = requests.post(emulator.endpoint + "/_emulator/state", data="{}", timeout=10)
    assert r.status_code == 403


def test_unverified_mode_accepts_unsigned(tmp_path: object) -> None:
    with EmulatorProcess(extra_args=["--no-verify-signature"]) as emu:
        r = requests.post(emu.endpoint + "/ListTable", data=b"", timeout=10)
        assert r.status_code == 200 and r.headers["authorization"].startswith("OTS ")


def test_unexpected_exception_is_500_and_server_keeps_serving(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from airflow_tablestore.emulator.config import EmulatorConfig
    from airflow_tablestore.emulator.server import Emulator

    emu = Emulator(EmulatorConfig(), str(tmp_path))

    def boom(body: bytes) -> Any:
        raise RuntimeError("handler bug")

    emu.handlers["/Boom"] = boom
    thread = threading.Thread(target=emu.serve_forever, daemon=True)
    thread.start()
    try:
        w = Wire(emu.endpoint)
        with caplog.at_level(logging.ERROR, logger="airflow_tablestore.emulator.server"):
            r = w.raw("/Boom", b"")
        status, code, message = _error(r)
        assert (status, code, message) == (500, "OTSInternalServerError", "Internal server error.")
        assert r.headers["x-ots-requestid"] in caplog.text and "handler bug" in caplog.text
        assert w.call("ListTable", b"").table_names == []
    finally:
        emu.shutdown()
        thread.join(10)


def test_a_path_two_surfaces_route_stops_the_server_at_start_up() -> None:
    """The surfaces' route tables are merged once, at start-up: a path claimed twice (or one under the control
    surface's prefix) is an error there, not requests quietly served by whichever table came last."""
    from airflow_tablestore.emulator.server import merge_routes

    class Surface:
        def __init__(self, *paths: str) -> None:
            self.paths = paths

        def routes(self) -> dict[str, Any]:
            return {path: self.routes for path in self.paths}

    assert set(merge_routes((Surface("/GetRow"), Surface("/tunnel/list")))) == {"/GetRow", "/tunnel/list"}
    with pytest.raises(ValueError, match="'/GetRow' is routed by both Surface and Surface"):
        merge_routes((Surface("/GetRow", "/PutRow"), Surface("/GetRow")))
    with pytest.raises(ValueError, match="under the control surface"):
        merge_routes((Surface("/_emulator/state"),))
