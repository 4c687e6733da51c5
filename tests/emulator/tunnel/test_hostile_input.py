"""Hostile or careless input over raw HTTP: each class of bad request gets a 4xx with a Tablestore error code and
a request id, and the emulator keeps serving with its data intact."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any

import pytest
import requests

from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_filter_pb2 as _filter_pb2
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2
from testing.emulator_http import Http, signed_headers
from testing.emulator_tunnel import CallError

table_pb2: Any = _table_pb2
tunnel_pb2: Any = _tunnel_pb2
filter_pb2: Any = _filter_pb2

MARK = "MARKER_TEXT_0123"
NOT_UTF8 = b"\xff\xfe" + MARK.encode()[2:]  # same length, so every enclosing length prefix stays right


def _poisoned(msg: Any) -> bytes:
    """``msg`` serialized with the text ``MARK`` replaced by bytes that are not UTF-8."""
    body = msg.SerializeToString()
    assert MARK.encode() in body
    return body.replace(MARK.encode(), NOT_UTF8)


def _error(resp: requests.Response) -> tuple[int, str]:
    assert resp.headers.get("x-ots-requestid"), "every error carries a request id"
    err = table_pb2.Error.FromString(resp.content)
    return resp.status_code, err.code


def _still_serving(http: Http, table: str) -> None:
    assert table in list(http.call("/ListTable", table_pb2.ListTableRequest(), table_pb2.ListTableResponse).table_names)
    http.tunnel().list_tunnels(table)


# -- text that is not UTF-8 -------------------------------------------------------------------------------

POISONED = [
    ("/CreateTable", table_pb2.CreateTableRequest(
        table_meta=table_pb2.TableMeta(table_name=MARK, primary_key=[table_pb2.PrimaryKeySchema(name="pk", type=1)]),
        reserved_throughput=table_pb2.ReservedThroughput(capacity_unit=table_pb2.CapacityUnit(read=0, write=0)))),
    ("/DescribeTable", table_pb2.DescribeTableRequest(table_name=MARK)),
    ("/GetRange", table_pb2.GetRangeRequest(table_name=MARK, direction=0, inclusive_start_primary_key=b"",
                                            exclusive_end_primary_key=b"")),
    ("/ListStream", table_pb2.ListStreamRequest(table_name=MARK)),
    ("/GetShardIterator", table_pb2.GetShardIteratorRequest(stream_id=MARK, shard_id="s")),
    ("/GetStreamRecord", table_pb2.GetStreamRecordRequest(shard_iterator=MARK)),
    ("/tunnel/create", tunnel_pb2.CreateTunnelRequest(tunnel=tunnel_pb2.Tunnel(table_name="t", tunnel_name=MARK,
                                                                              tunnel_type=3))),
    ("/tunnel/describe", tunnel_pb2.DescribeTunnelRequest(table_name="t", tunnel_name=MARK)),
    ("/tunnel/connect", tunnel_pb2.ConnectRequest(tunnel_id=MARK, client_config=tunnel_pb2.ClientConfig(timeout=30))),
    ("/tunnel/readrecords", tunnel_pb2.ReadRecordsRequest(tunnel_id="a", client_id="b", channel_id="c", token=MARK)),
    ("/tunnel/checkpoint", tunnel_pb2.CheckpointRequest(tunnel_id="a", client_id="b", channel_id="c",
                                                        checkpoint=MARK, sequence_number=1)),
]


@pytest.mark.parametrize(("uri", "msg"), POISONED, ids=[uri for uri, _ in POISONED])
def test_text_that_is_not_utf8_is_400(http: Http, table: str, uri: str, msg: Any) -> None:
    status, code = _error(http.post_raw(uri, _poisoned(msg)))
    assert (status, code) == (400, "OTSParameterInvalid")
    _still_serving(http, table)


def test_a_tunnel_name_that_is_not_utf8_is_never_stored(http: Http, table: str) -> None:
    """It used to be stored, after which every ListTunnel answered 500, also after a restart."""
    msg = tunnel_pb2.CreateTunnelRequest(tunnel=tunnel_pb2.Tunnel(table_name=table, tunnel_name=MARK, tunnel_type=3))
    assert _error(http.post_raw("/tunnel/create", _poisoned(msg))) == (400, "OTSParameterInvalid")
    assert [t.tunnel_name for t in http.tunnel().list_tunnels(table)] == []


def test_a_token_with_a_non_utf8_iterator_is_400(http: Http, table: str) -> None:
    content = tunnel_pb2.TokenContentV2(iterator=MARK, timestamp=1, total_count=0)
    raw = tunnel_pb2.Token(version=2, content=_poisoned(content)).SerializeToString()
    tunnel = http.tunnel()
    tunnel_id = tunnel.create(table, "tok")
    client = tunnel.connect(tunnel_id)
    channel = next(iter(tunnel.heartbeat(tunnel_id, client)), "none")
    with pytest.raises(CallError) as info:
        tunnel.read(tunnel_id, client, channel, base64.b64encode(raw).decode())
    assert (info.value.status, info.value.code) == (400, "OTSParameterInvalid")


# -- unbounded nesting ------------------------------------------------------------------------------------


def test_a_deeply_nested_filter_is_400(http: Http, table: str) -> None:
    value = b"\x00"  # any bytes: the nesting is refused before values are decoded
    node = filter_pb2.Filter(type=filter_pb2.FT_SINGLE_COLUMN_VALUE, filter=filter_pb2.SingleColumnValueFilter(
        comparator=1, column_name="col", column_value=value, filter_if_missing=False,
        latest_version_only=True).SerializeToString())
    for _ in range(3000):
        wrapper = filter_pb2.CompositeColumnValueFilter(combinator=1, sub_filters=[node])
        node = filter_pb2.Filter(type=filter_pb2.FT_COMPOSITE_COLUMN_VALUE, filter=wrapper.SerializeToString())
    from airflow_tablestore.emulator.codec.encode import encode_row

    req = table_pb2.GetRowRequest(table_name=table, primary_key=encode_row([("pk", 1)], []),
                                  filter=node.SerializeToString(), max_versions=1)
    assert _error(http.post_raw("/GetRow", req.SerializeToString())) == (400, "OTSParameterInvalid")
    _still_serving(http, table)


@pytest.mark.parametrize("document", ["[" * 300 + "]" * 300, "[" * 100_000])
def test_a_deeply_nested_shard_iterator_is_400(http: Http, table: str, document: str) -> None:
    iterator = base64.urlsafe_b64encode(document.encode()).decode()
    req = table_pb2.GetStreamRecordRequest(shard_iterator=iterator)
    assert _error(http.post_raw("/GetStreamRecord", req.SerializeToString())) == (400, "OTSParameterInvalid")
    _still_serving(http, table)


# -- headers ----------------------------------------------------------------------------------------------


def _signed(emu: EmulatorProcess, uri: str, body: bytes, **overrides: str) -> dict[str, str]:
    return signed_headers(emu, uri, body, dict(overrides))


def test_a_date_with_thousands_of_fraction_digits_is_400(emu: EmulatorProcess, http: Http, table: str) -> None:
    date = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime()) + "1" * 5000 + "Z"
    resp = requests.post(emu.endpoint + "/ListTable", data=b"", headers=_signed(emu, "/ListTable", b"", **{
        "x-ots-date": date}), timeout=30)
    assert _error(resp) == (400, "OTSParameterInvalid")
    assert len(resp.content) < 1000  # the message does not echo the whole header
    _still_serving(http, table)


def test_a_signature_with_non_ascii_characters_is_403(emu: EmulatorProcess, http: Http, table: str) -> None:
    headers = signed_headers(emu, "/ListTable", b"", signature="\u00e9\u00e8" * 14)
    resp = requests.post(emu.endpoint + "/ListTable", data=b"", headers=headers, timeout=30)
    assert _error(resp) == (403, "OTSAuthFailed")
    _still_serving(http, table)


# -- HTTP framing -----------------------------------------------------------------------------------------


def test_a_chunked_body_is_read_as_the_body(emu: EmulatorProcess, http: Http, table: str) -> None:
    body = table_pb2.DescribeTableRequest(table_name=table).SerializeToString()
    with requests.Session() as session:
        resp = session.post(emu.endpoint + "/DescribeTable", data=iter([body[:3], body[3:]]),
                            headers=_signed(emu, "/DescribeTable", body), timeout=30)
        assert resp.status_code == 200, resp.content
        assert table_pb2.DescribeTableResponse.FromString(resp.content).table_meta.table_name == table
        again = session.post(emu.endpoint + "/ListTable", data=b"", headers=_signed(emu, "/ListTable", b""), timeout=30)
        assert again.status_code == 200


def test_options_is_a_protobuf_405(emu: EmulatorProcess) -> None:
    resp = requests.options(emu.endpoint + "/ListTable", timeout=30)
    assert _error(resp) == (405, "OTSMethodNotAllowed")


def _responses(sock: socket.socket, count: int, timeout: float = 30) -> list[bytes]:
    """Read ``count`` HTTP responses (status line + headers + Content-Length body) from ``sock``."""
    sock.settimeout(timeout)
    buffer = b""
    out = []
    while len(out) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(buffer) < length:
            buffer += sock.recv(65536)
        out.append(head.split(b"\r\n", 1)[0])
        buffer = buffer[length:]
    return out


def test_a_get_with_a_body_does_not_leak_into_the_next_request(emu: EmulatorProcess) -> None:
    smuggled = b"POST /DeleteTable HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
    headers = _signed(emu, "/ListTable", b"")
    post = ("POST /ListTable HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
    host, port = emu.endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"GET /ListTable HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(smuggled) + smuggled
                     + post)
        statuses = _responses(sock, 2)
    assert [s.split()[1] for s in statuses] == [b"405", b"200"]


def test_a_stalled_connection_is_closed_without_holding_up_others() -> None:
    with EmulatorProcess(extra_args=["--connection-timeout", "1"]) as emu:
        host, port = emu.endpoint.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as stalled:
            stalled.sendall(b"POST /ListTable HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
            resp = requests.post(emu.endpoint + "/ListTable", data=b"", headers=_signed(emu, "/ListTable", b""),
                                 timeout=30)
            assert resp.status_code == 200  # served while the other connection is stalled
            # The server ends the connection (EOF or reset) after its 1 s timeout; if it did not, recv would raise
            # TimeoutError after our own 30 s and fail the test.
            stalled.settimeout(30)
            closed_by_server = False
            try:
                while stalled.recv(65536):
                    pass
                closed_by_server = True
            except ConnectionResetError:
                closed_by_server = True
            assert closed_by_server


# -- tunnel tokens are bound to their tunnel and channel --------------------------------------------------


def test_a_token_of_another_tunnel_or_channel_is_refused(http: Http, table: str) -> None:
    http.write(table, {i: f"v{i}" for i in range(25)})  # 10 rows per base channel: 3 channels
    tunnel = http.tunnel()
    first, second = tunnel.create(table, "first"), tunnel.create(table, "second")
    c1, c2 = tunnel.connect(first), tunnel.connect(second)
    ch1, ch2 = sorted(tunnel.heartbeat(first, c1)), sorted(tunnel.heartbeat(second, c2))
    token1, _ = tunnel.get_checkpoint(first, c1, ch1[0])
    token2, seq2 = tunnel.get_checkpoint(second, c2, ch2[0])
    for attempt in (
        lambda: tunnel.read(second, c2, ch2[0], token1),  # another tunnel's token
        lambda: tunnel.checkpoint(second, c2, ch2[0], token1, seq2 + 1),
        lambda: tunnel.read(first, c1, ch1[1], token1),  # another channel's token
    ):
        with pytest.raises(CallError) as info:
            attempt()
        assert (info.value.status, info.value.code) == (400, "OTSParameterInvalid")
        assert "another tunnel or channel" in info.value.message
    assert tunnel.get_checkpoint(second, c2, ch2[0]) == (token2, seq2)  # untouched


# -- the control API is signed ----------------------------------------------------------------------------


def test_the_control_api_needs_the_secret(emu: EmulatorProcess) -> None:
    from airflow_tablestore.emulator.control import ControlClient, ControlError

    url = emu.endpoint + "/_emulator/time/advance"
    body = json.dumps({"seconds": 3600})
    assert requests.post(url, data=body, timeout=30).status_code == 403
    assert requests.post(url, data=body, headers={"x-emulator-access-key-id": emu.access_key_id},
                         timeout=30).status_code == 403  # the ID every signed response shows is not enough
    with pytest.raises(ControlError, match="403"):
        ControlClient(emu.endpoint, "not-the-secret").state()
    assert "now_us" in emu.control.state()
    assert "secret" not in repr(emu.control)


def test_the_clock_never_goes_backwards(emu: EmulatorProcess) -> None:
    from airflow_tablestore.emulator.control import ControlError

    before = emu.control.state()["now_us"]
    with pytest.raises(ControlError, match="400.*only moves forward"):
        emu.control.advance_time(-60)
    with pytest.raises(ControlError, match="400.*time only moves forward"):
        emu.control.set_time(before / 1e6 - 3600)
    assert emu.control.state()["now_us"] > before


def _exchange(emu: EmulatorProcess, data: bytes, count: int) -> list[bytes]:
    host, port = emu.endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(data)
        return _responses(sock, count)


def _list_table(emu: EmulatorProcess, version: str = "HTTP/1.1", extra: str = "") -> bytes:
    headers = _signed(emu, "/ListTable", b"")
    return (f"POST /ListTable {version}\r\nHost: x\r\nContent-Length: 0\r\n{extra}"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()


@pytest.mark.parametrize(("request_line", "status"), [
    ("POST /ListTable HTTP/2.0", b"505"),
    ("POST /ListTable HTTP/\u00b2.1", b"400"),  # not ASCII digits
    ("POST /ListTable HTTP/1." + "1" * 5000, b"400"),
    ("POST /ListTable HTTP/11", b"400"),
    ("POST /ListTable HTTP/1.1 extra", b"400"),
])
def test_a_malformed_request_line_is_answered(emu: EmulatorProcess, request_line: str, status: bytes) -> None:
    statuses = _exchange(emu, request_line.encode("utf-8") + b"\r\nHost: x\r\n\r\n", 1)
    assert [s.split()[1] for s in statuses] == [status]


@pytest.mark.parametrize(("headers", "status"), [
    ("X-A: a\r\n" * 101, b"431"),  # repeated names count as the lines they are
    ("X-Long: " + "a" * 70000 + "\r\n", b"431"),
    ("No colon here\r\n", b"400"),
    ("Spaced name : v\r\n", b"400"),
])
def test_malformed_headers_are_answered(emu: EmulatorProcess, headers: str, status: bytes) -> None:
    statuses = _exchange(emu, f"POST /ListTable HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode(), 1)
    assert [s.split()[1] for s in statuses] == [status]


def test_keep_alive_folded_and_repeated_headers(emu: EmulatorProcess) -> None:
    # HTTP/1.0 with keep-alive keeps the connection: both requests are answered on it
    assert [s.split()[1] for s in _exchange(emu, _list_table(emu, "HTTP/1.0", "Connection: keep-alive\r\n") * 2,
                                            2)] == [b"200", b"200"]
    # HTTP/1.0 without it, and Connection: close, end the connection after one answer
    assert len(_exchange(emu, _list_table(emu, "HTTP/1.0") * 2, 2)) == 1
    assert len(_exchange(emu, _list_table(emu, extra="Connection: close\r\n") * 2, 2)) == 1
    # a folded header and a repeated one (the first wins) leave the signed request valid
    assert [s.split()[1] for s in _exchange(emu, _list_table(emu, extra="X-Folded: a\r\n  b\r\nHost: y\r\n"),
                                            1)] == [b"200"]
