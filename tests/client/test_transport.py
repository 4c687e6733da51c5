"""Transport against a scripted local HTTP server: envelope, verification, error mapping, network errors."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from airflow_tablestore.client import auth
from airflow_tablestore.client.errors import (
    ConditionFailedError,
    InvalidParameterError,
    ServerError,
    TablestoreClientError,
    TablestoreError,
    TablestoreNetworkError,
    TablestoreServiceError,
)
from airflow_tablestore.client.retry import RetryPolicy
from airflow_tablestore.client.transport import Transport, parse_endpoint
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs
tunnel_pb2: Any = _tunnel_pb2  # generated code has no type stubs

SECRET = "TopSecretAccessKeyValue"
TOKEN = "TopSecretStsTokenValue"


def _transport(endpoint: str, **kwargs: Any) -> Transport:
    kwargs.setdefault("retry", RetryPolicy.no_retry())
    creds = kwargs.pop("credentials", auth.Credentials("my-ak-id", SECRET, sts_token=TOKEN))
    return Transport(endpoint, creds, "inst", timeout=(2, 5), **kwargs)


def _error_body(code: str, message: str) -> bytes:
    return table_pb2.Error(code=code, message=message).SerializeToString()


def test_request_envelope_is_signed_and_complete(scripted: Any) -> None:
    body = table_pb2.ListTableResponse(table_names=["a", "b"]).SerializeToString()
    scripted.script(scripted.Reply(200, body))
    with _transport(scripted.endpoint) as transport:
        answer = transport.call("/ListTable", table_pb2.ListTableRequest(), table_pb2.ListTableResponse,
                                idempotent=True)
    assert list(answer.table_names) == ["a", "b"]
    (seen,) = scripted.requests
    assert seen.path == "/ListTable" and seen.body == b""
    headers = seen.headers
    assert headers["x-ots-apiversion"] == "2015-12-31"
    assert headers["x-ots-accesskeyid"] == "my-ak-id"
    assert headers["x-ots-instancename"] == "inst"
    assert headers["x-ots-contentmd5"] == auth.EMPTY_BODY_MD5
    assert headers["x-ots-ststoken"] == TOKEN
    assert len(headers["x-ots-date"]) == len("2024-01-02T03:04:05.678Z") and headers["x-ots-date"].endswith(
        "Z"
    )
    assert headers["x-ots-signature"] == auth.sign_v2(SECRET, "/ListTable", headers)


def test_path_prefix_is_in_url_but_not_in_signature(scripted: Any) -> None:
    scripted.script(scripted.Reply(200, b""))
    request = tunnel_pb2.ConnectRequest(tunnel_id="t1", client_config=tunnel_pb2.ClientConfig(timeout=300))
    with _transport(scripted.endpoint + "/some/prefix/") as transport:
        transport.call("/tunnel/connect", request, tunnel_pb2.ConnectResponse, idempotent=False)
    (seen,) = scripted.requests
    assert seen.path == "/some/prefix/tunnel/connect"
    assert seen.body == request.SerializeToString()
    assert seen.headers["x-ots-contentmd5"] == auth.content_md5(seen.body)
    assert seen.headers["x-ots-signature"] == auth.sign_v2(SECRET, "/tunnel/connect", seen.headers)


def test_v4_signing_when_region_given(scripted: Any) -> None:
    scripted.script(scripted.Reply(200, b""))
    creds = auth.Credentials("my-ak-id", SECRET, region="cn-hangzhou")
    with _transport(scripted.endpoint, credentials=creds) as transport:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    headers = scripted.requests[0].headers
    assert "x-ots-signature" not in headers
    key = auth.derive_v4_key(SECRET, headers["x-ots-signdate"], "cn-hangzhou")
    assert headers["x-ots-signaturev4"] == auth.sign_v4(key, "/ListTable", headers)


def test_service_error_maps_code_status_and_request_id(scripted: Any) -> None:
    scripted.script(scripted.Reply(403, _error_body("OTSConditionCheckFail", "Condition check failed."),
                                   request_id="rid-42"))
    with _transport(scripted.endpoint) as transport, pytest.raises(ConditionFailedError) as info:
        transport.call("/PutRow", None, table_pb2.PutRowResponse, idempotent=False)
    error = info.value
    assert (error.code, error.message, error.http_status, error.request_id) == (
        "OTSConditionCheckFail", "Condition check failed.", 403, "rid-42")


def test_tunnel_error_body_with_tunnel_id_is_parsed(scripted: Any) -> None:
    body = tunnel_pb2.Error(
        code="OTSParameterInvalid", message="tunnel not exist", tunnel_id="t9"
    ).SerializeToString()
    scripted.script(scripted.Reply(400, body))
    with _transport(scripted.endpoint) as transport, pytest.raises(InvalidParameterError) as info:
        transport.call("/tunnel/describe", None, tunnel_pb2.DescribeTunnelResponse, idempotent=True)
    assert info.value.code == "OTSParameterInvalid" and "tunnel not exist" in info.value.message


def test_html_error_body_gives_typed_error_with_status_and_request_id(scripted: Any) -> None:
    html = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    scripted.script(scripted.Reply(502, html, headers={"Content-Type": "text/html"}, request_id="rid-gw"))
    with _transport(scripted.endpoint) as transport, pytest.raises(ServerError) as info:
        transport.call("/GetRow", None, table_pb2.GetRowResponse, idempotent=True)
    error = info.value
    assert error.http_status == 502 and error.request_id == "rid-gw"
    assert error.code == "OTSUnexpectedResponse"
    assert "text/html" in error.message and "502 Bad Gateway" in error.message


def test_garbage_4xx_body_gives_typed_error(scripted: Any) -> None:
    scripted.script(scripted.Reply(400, b"\xff\xfe\x00garbage\x01", md5=""))
    with _transport(scripted.endpoint) as transport, pytest.raises(TablestoreServiceError) as info:
        transport.call("/GetRow", None, table_pb2.GetRowResponse, idempotent=True)
    assert info.value.http_status == 400 and info.value.code == "OTSUnexpectedResponse"
    assert not isinstance(info.value, ServerError)


def test_empty_error_body_gives_typed_error(scripted: Any) -> None:
    scripted.script(scripted.Reply(404, b"", request_id=None))
    with _transport(scripted.endpoint) as transport, pytest.raises(TablestoreServiceError) as info:
        transport.call("/GetRow", None, table_pb2.GetRowResponse, idempotent=True)
    assert info.value.http_status == 404 and info.value.request_id is None


def test_md5_mismatch_is_rejected(scripted: Any) -> None:
    body = table_pb2.ListTableResponse(table_names=["a"]).SerializeToString()
    scripted.script(scripted.Reply(200, body, md5=auth.content_md5(b"something else")))
    with _transport(scripted.endpoint) as transport, pytest.raises(TablestoreClientError) as info:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert "MD5 mismatch" in str(info.value) and info.value.request_id == "req-scripted"


def test_asks_for_uncompressed_answers(scripted: Any) -> None:
    """x-ots-contentmd5 is over the body as sent: the client must not invite gzip (requests' default)."""
    scripted.script(scripted.Reply(200, b""))
    with _transport(scripted.endpoint) as transport:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    (seen,) = scripted.requests
    assert seen.headers["accept-encoding"] == "identity"


def test_missing_md5_is_accepted(scripted: Any) -> None:
    body = table_pb2.ListTableResponse(table_names=["a"]).SerializeToString()
    scripted.script(scripted.Reply(200, body, md5=""))
    with _transport(scripted.endpoint) as transport:
        assert list(
            transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True).table_names
        ) == ["a"]


def test_undecodable_success_body(scripted: Any) -> None:
    scripted.script(scripted.Reply(200, b"\xff\xff\xff"))
    with _transport(scripted.endpoint) as transport, pytest.raises(TablestoreClientError) as info:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert "ListTableResponse" in str(info.value) and info.value.http_status == 200


def test_response_signature_verification(scripted: Any) -> None:
    body = table_pb2.ListTableResponse(table_names=["a"]).SerializeToString()
    signed = {"x-ots-contentmd5": auth.content_md5(body), "x-ots-requestid": "req-scripted",
              "x-ots-date": "2026-01-01T00:00:00.000Z", "x-ots-contenttype": "protocol buffer"}
    good = f"OTS my-ak-id:{auth.response_signature(SECRET, '/ListTable', signed)}"
    extra = {"x-ots-date": signed["x-ots-date"], "x-ots-contenttype": "protocol buffer"}
    scripted.script(scripted.Reply(200, body, headers={**extra, "Authorization": good}),
                    scripted.Reply(200, body, headers={**extra, "Authorization": "OTS my-ak-id:forged="}),
                    scripted.Reply(200, body, headers=extra))
    with _transport(scripted.endpoint, verify_response_signature=True) as transport:
        assert list(
            transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True).table_names
        ) == ["a"]
        with pytest.raises(TablestoreClientError, match="invalid signature"):
            transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
        with pytest.raises(TablestoreClientError, match="no Authorization"):
            transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_network_error_with_endpoint_and_no_secrets() -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    with _transport(endpoint) as transport, pytest.raises(TablestoreNetworkError) as info:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=False)
    text = str(info.value) + repr(info.value)
    assert endpoint in text
    assert SECRET not in text and TOKEN not in text
    assert info.value.__cause__ is None or SECRET not in str(info.value.__cause__)


def test_connection_refused_retried_for_idempotent() -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    calls: list[float] = []
    policy = RetryPolicy(max_attempts=3, sleep=calls.append)
    with _transport(endpoint, retry=policy) as transport, pytest.raises(TablestoreNetworkError):
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert len(calls) == 2


def test_read_timeout_is_network_error(scripted: Any) -> None:
    scripted.script(scripted.Reply(200, b"", delay_s=1.5))
    transport = Transport(scripted.endpoint, auth.Credentials("id", SECRET), "inst", timeout=(2, 0.3),
                          retry=RetryPolicy.no_retry())
    with transport, pytest.raises(TablestoreNetworkError, match="timed out"):
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)


@pytest.mark.parametrize("endpoint", [
    "", "ots.example.com", "ftp://host", "http://", "http://user:pw@host", "http://host?x=1", "http://host:notaport",
])
def test_endpoint_is_validated_up_front(endpoint: str) -> None:
    with pytest.raises(TablestoreClientError) as info:
        _transport(endpoint)
    assert "pw" not in str(info.value) or "user:pw" not in str(info.value)


def test_parse_endpoint_splits_prefix() -> None:
    assert parse_endpoint("https://inst.cn-hangzhou.ots.aliyuncs.com") == (
        "https://inst.cn-hangzhou.ots.aliyuncs.com",
        "",
    )
    assert parse_endpoint("http://127.0.0.1:8080/p/q/") == ("http://127.0.0.1:8080", "/p/q")


def test_invalid_path_and_closed_transport(scripted: Any) -> None:
    transport = _transport(scripted.endpoint)
    with pytest.raises(TablestoreClientError, match="invalid API path"):
        transport.call("ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    transport.close()
    with pytest.raises(TablestoreClientError, match="closed"):
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)


def test_concurrent_calls_from_threads(scripted: Any) -> None:
    body = table_pb2.ListTableResponse(table_names=["x"]).SerializeToString()
    scripted.script(scripted.Reply(200, body))
    results: list[list[str]] = []
    errors: list[BaseException] = []
    with _transport(scripted.endpoint, pool_size=4) as transport:
        def work() -> None:
            try:
                for _ in range(10):
                    answer = transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
                    results.append(list(answer.table_names))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert results == [["x"]] * 60
    assert len(scripted.requests) == 60


def test_repr_of_transport_and_errors_hide_secrets(scripted: Any) -> None:
    scripted.script(scripted.Reply(403, _error_body("OTSAuthFailed", "Signature mismatch.")))
    transport = _transport(scripted.endpoint)
    with transport, pytest.raises(TablestoreError) as info:
        transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    for text in (repr(transport), str(info.value), repr(info.value), repr(transport.credentials)):
        assert SECRET not in text and TOKEN not in text


def test_proxy_environment_is_honoured(scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    body = table_pb2.ListTableResponse(table_names=["via-proxy"]).SerializeToString()
    scripted.script(scripted.Reply(200, body))
    monkeypatch.setenv("HTTP_PROXY", scripted.endpoint)
    monkeypatch.setenv("http_proxy", scripted.endpoint)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with _transport("http://tablestore.example.invalid/prefix") as transport:
        answer = transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert list(answer.table_names) == ["via-proxy"]
    (seen,) = scripted.requests
    assert seen.path == "http://tablestore.example.invalid/prefix/ListTable"  # absolute URI: proxied
    assert seen.headers["x-ots-signature"] == auth.sign_v2(SECRET, "/ListTable", seen.headers)


def test_no_proxy_environment_bypasses_the_proxy(scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    body = table_pb2.ListTableResponse(table_names=["direct"]).SerializeToString()
    scripted.script(scripted.Reply(200, body))
    for name in ("HTTP_PROXY", "http_proxy"):  # a proxy nothing listens on: a proxied call would fail
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    with _transport(scripted.endpoint) as transport:
        answer = transport.call("/ListTable", None, table_pb2.ListTableResponse, idempotent=True)
    assert list(answer.table_names) == ["direct"]
    (seen,) = scripted.requests
    assert seen.path == "/ListTable"  # origin form: not proxied
