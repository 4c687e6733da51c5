"""Signing vectors from the references (table-api.md §3a, table-api-proto.md §1.1-1.2, tunnel-protocol.md
§2.2)."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from airflow_tablestore.client import auth

TABLE_HEADERS = {
    "x-ots-date": "2026-01-01T00:00:00.000Z",
    "x-ots-apiversion": "2015-12-31",
    "x-ots-accesskeyid": "fakeAccessKeyId",
    "x-ots-instancename": "fakeinst",
    "x-ots-contentmd5": "1B2M2Y8AsgTpgAmY7PhCfg==",
}
PROTO_HEADERS = {
    "x-ots-date": "2024-01-02T03:04:05.000Z",
    "x-ots-apiversion": "2015-12-31",
    "x-ots-accesskeyid": "testid",
    "x-ots-instancename": "inst",
    "x-ots-contentmd5": "1B2M2Y8AsgTpgAmY7PhCfg==",
}


def test_v2_table_api_vector() -> None:
    assert auth.sign_v2("fakeAccessKeySecret", "/ListTable", TABLE_HEADERS) == "KXR0vAnHQkK7lObJNn+S7azq9GE="


def test_v2_proto_reference_vector() -> None:
    assert auth.sign_v2("testsecret", "/ListTable", PROTO_HEADERS) == "l8hZr0IhTSg8xClIhHGF+y5Smzg="


def test_v2_captured_request_canonical_string() -> None:
    headers = dict(TABLE_HEADERS, **{"x-ots-date": "2026-11-21T10:24:05.000Z"})
    assert auth.canonical_string("/ListTable", headers) == (
        "/ListTable\nPOST\n\nx-ots-accesskeyid:fakeAccessKeyId\nx-ots-apiversion:2015-12-31\n"
        "x-ots-contentmd5:1B2M2Y8AsgTpgAmY7PhCfg==\nx-ots-date:2026-11-21T10:24:05.000Z\n"
        "x-ots-instancename:fakeinst\n"
    )
    assert auth.sign_v2("fakeAccessKeySecret", "/ListTable", headers) == "XSVw6CS0q8ozipu/F7j5LH/wuS0="


def test_v2_tunnel_vector() -> None:
    body = bytes.fromhex("0a027431120908ac021204686f7374")
    assert auth.content_md5(body) == "VRMOHya7CK+3Roc/Aock+w=="
    headers = {
        "x-ots-date": "2024-01-02T03:04:05.678Z",
        "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": "testAccessKeyId",
        "x-ots-instancename": "myinstance",
        "x-ots-contentmd5": "VRMOHya7CK+3Roc/Aock+w==",
    }
    assert auth.sign_v2("testAccessKeySecret", "/tunnel/connect", headers) == "V0M8FGlANQC3F34HGzfadx4+U+U="


def test_canonical_string_ignores_signature_and_non_ots_headers_and_trims() -> None:
    headers = dict(
        PROTO_HEADERS,
        **{"x-ots-signature": "zzz", "User-Agent": "x", "X-OTS-Date": " 2024-01-02T03:04:05.000Z "},
    )
    del headers["x-ots-date"]
    assert auth.sign_v2("testsecret", "/ListTable", headers) == "l8hZr0IhTSg8xClIhHGF+y5Smzg="


@pytest.mark.parametrize(
    ("secret", "date", "headers", "key", "signature"),
    [
        ("fakeAccessKeySecret", "20260101", TABLE_HEADERS, "nvcCUcWJrIXM4QJUGcqBRSvkApO+Ucf3290Cy3+/agI=",
         "82kktgNR9G4PdT3wZJHdaTjkU7PzYBi/Z+FElCiWlpI="),
        ("testsecret", "20240102", PROTO_HEADERS, "ytaYVQf4sduCec6WEA4ZccLVPDwA1ChFD7R5xHfaYG0=",
         "SW0Mju4Riu1lpupOWGlehAUYfKtVe76EzRBASRrnbmo="),
    ],
)
def test_v4_vectors(secret: str, date: str, headers: dict[str, str], key: str, signature: str) -> None:
    assert auth.derive_v4_key(secret, date, "cn-hangzhou") == key
    signed = dict(headers, **{"x-ots-signdate": date, "x-ots-signregion": "cn-hangzhou"})
    assert auth.sign_v4(key, "/ListTable", signed) == signature


def test_response_signature_vectors() -> None:
    table_response = {
        "x-ots-contentmd5": "AjIX0XBNSdmRMALQxUDRsQ==",
        "x-ots-requestid": "00000000-0000-0000-0000-000000000001",
        "x-ots-date": "2026-01-01T00:00:00.000Z",
        "x-ots-contenttype": "protocol buffer",
    }
    assert auth.content_md5(bytes.fromhex("0a0274310a027432")) == "AjIX0XBNSdmRMALQxUDRsQ=="
    assert (
        auth.response_signature("fakeAccessKeySecret", "/ListTable", table_response)
        == "4EbiYRseYTQzIPUv/IPXHplso2o="
    )
    v4_key = "nvcCUcWJrIXM4QJUGcqBRSvkApO+Ucf3290Cy3+/agI="
    assert auth.response_signature(v4_key, "/ListTable", table_response) == "qL/40lKLLFGGjWnDKniygVXED8A="
    proto_response = {
        "x-ots-contentmd5": "1B2M2Y8AsgTpgAmY7PhCfg==",
        "x-ots-contenttype": "protocol buffer",
        "x-ots-date": "2024-01-02T03:04:05.123456Z",
        "x-ots-requestid": "req-1",
    }
    assert (
        auth.response_signature("testsecret", "/ListTable", proto_response) == "NttkxKDMd6PC4u2ifbCKfOgS8W0="
    )
    assert auth.response_signature(
        "ytaYVQf4sduCec6WEA4ZccLVPDwA1ChFD7R5xHfaYG0=", "/ListTable", proto_response
    ) == ("CxbY3/D0EKq0vD/Mb/EZ7FQqNRc=")


def test_empty_body_md5_and_date_format() -> None:
    assert auth.content_md5(b"") == auth.EMPTY_BODY_MD5
    moment = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert auth.format_date(moment) == "2024-01-02T03:04:05.678Z"
    assert auth.format_date(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2024-01-02T03:04:05.000Z"


def test_build_headers_v2_reproduces_reference_request() -> None:
    creds = auth.Credentials("testid", "testsecret")
    headers = auth.build_headers(
        creds, "inst", "/ListTable", b"", now=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    assert headers["x-ots-signature"] == "l8hZr0IhTSg8xClIhHGF+y5Smzg="
    assert "x-ots-ststoken" not in headers and "x-ots-signaturev4" not in headers


def test_build_headers_v4_reproduces_reference_request() -> None:
    creds = auth.Credentials("testid", "testsecret", region="cn-hangzhou")
    headers = auth.build_headers(
        creds, "inst", "/ListTable", b"", now=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    assert headers["x-ots-signdate"] == "20240102"
    assert headers["x-ots-signregion"] == "cn-hangzhou"
    assert headers["x-ots-signaturev4"] == "SW0Mju4Riu1lpupOWGlehAUYfKtVe76EzRBASRrnbmo="
    assert "x-ots-signature" not in headers
    assert auth.response_signing_key(creds, headers) == "ytaYVQf4sduCec6WEA4ZccLVPDwA1ChFD7R5xHfaYG0="


def test_build_headers_sts_token_is_sent_and_signed() -> None:
    creds = auth.Credentials("testid", "testsecret", sts_token="token-xyz")
    now = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    headers = auth.build_headers(creds, "inst", "/ListTable", b"", now=now)
    assert headers["x-ots-ststoken"] == "token-xyz"
    plain = auth.build_headers(auth.Credentials("testid", "testsecret"), "inst", "/ListTable", b"", now=now)
    assert headers["x-ots-signature"] != plain["x-ots-signature"]
    assert headers["x-ots-signature"] == auth.sign_v2("testsecret", "/ListTable", headers)


def test_credentials_never_show_secrets() -> None:
    creds = auth.Credentials("my-id", "SUPERSECRETVALUE", sts_token="STSTOKENVALUE", region="cn-hangzhou")
    for text in (repr(creds), str(creds), f"{creds}", repr([creds])):
        assert "SUPERSECRETVALUE" not in text and "STSTOKENVALUE" not in text
        assert "my-id" in text
    clone = pickle.loads(pickle.dumps(creds))
    assert clone.access_key_secret == "SUPERSECRETVALUE" and clone.sts_token == "STSTOKENVALUE"


@pytest.mark.parametrize(("key_id", "secret"), [("", "s"), ("id", ""), (None, "s")])
def test_credentials_reject_empty(key_id: object, secret: str) -> None:
    with pytest.raises(ValueError):
        auth.Credentials(key_id, secret)  # type: ignore[arg-type]
