"""Hooks: connection parsing, secret masking, clients against the emulator, the consume-point rule."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from airflow.sdk import Connection
from airflow.sdk.log import redact

from airflow_tablestore.client.epoch import parse_epoch_ns as to_epoch_ns
from airflow_tablestore.client.errors import TunnelExpiredError, TunnelNotFoundError
from airflow_tablestore.client.model import (
    ChannelInfo,
    ChannelStatus,
    TunnelDescription,
    TunnelInfo,
    TunnelStage,
    TunnelType,
)
from airflow_tablestore.client.settings import ConnectionSettings, SettingsError, normalize_endpoint
from airflow_tablestore.client.tunnel.consume_point import evaluate_consume_point
from airflow_tablestore.hooks.base import TablestoreBaseHook, parse_connection
from airflow_tablestore.hooks.table import TablestoreHook
from airflow_tablestore.hooks.tunnel import TablestoreTunnelHook

SECRET = "sEcReT-access-key-0123456789"
TOKEN = "sts-TOKEN-abcdefghijklmnop"


def _conn(**overrides: Any) -> Connection:
    fields: dict[str, Any] = {
        "conn_id": "ts",
        "conn_type": "tablestore",
        "host": "myinst.cn-hangzhou.ots.aliyuncs.com",
        "login": "LTAIexample",
        "password": SECRET,
        "extra": json.dumps({"instance_name": "myinst"}),
    }
    fields.update(overrides)
    return Connection(**fields)


def _parse(conn: Connection, **kwargs: Any) -> ConnectionSettings:
    return parse_connection(conn, json.loads(conn.extra or "{}"), **kwargs)


# -- connection parsing -----------------------------------------------------------------------------


def test_bare_host_defaults_to_https_and_fields_map() -> None:
    config = _parse(_conn(extra=json.dumps({
        "instance_name": "myinst", "region": "cn-hangzhou", "sts_token": TOKEN,
        "connect_timeout": "3", "read_timeout": 30,
    })))
    assert config.endpoint == "https://myinst.cn-hangzhou.ots.aliyuncs.com"
    assert (config.access_key_id, config.access_key_secret, config.instance_name) == (
        "LTAIexample", SECRET, "myinst")
    assert (config.region, config.sts_token) == ("cn-hangzhou", TOKEN)
    kwargs = config.client_kwargs()
    assert kwargs["timeout"] == (3.0, 30.0)
    assert kwargs["sts_token"] == TOKEN and kwargs["region"] == "cn-hangzhou"


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("http://127.0.0.1:8800", None, "http://127.0.0.1:8800"),
        ("127.0.0.1", 8800, "https://127.0.0.1:8800"),
        ("https://h.example.com/", None, "https://h.example.com"),
        ("https://h.example.com/prefix", None, "https://h.example.com/prefix"),
    ],
)
def test_endpoint_normalisation(host: str, port: int | None, expected: str) -> None:
    assert normalize_endpoint(host, port) == expected


@pytest.mark.parametrize(
    ("host", "fragment"),
    [("", "missing Tablestore settings"), ("ftp://h", "http:// or https://"), ("https://h?x=1", "query"),
     ("https://user:pw@h", "credentials"), ("https://h:99999", "invalid port")],
)
def test_bad_endpoint_names_the_field(host: str, fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        _parse(_conn(host=host))
    assert "'host' (Endpoint)" in str(info.value) and fragment in str(info.value)
    assert "pw" not in str(info.value)
    assert isinstance(info.value, ValueError)  # usable as a plain ValueError too


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"login": None}, "'login' (AccessKey ID)"),
        ({"password": None}, "'password' (AccessKey Secret)"),
        ({"extra": json.dumps({})}, "'instance_name'"),
        ({"extra": json.dumps({"instance_name": "i", "read_timeout": "soon"})}, "'read_timeout'"),
        ({"extra": json.dumps({"instance_name": "i", "connect_timeout": -1})}, "'connect_timeout'"),
        ({"extra": json.dumps({"instance_name": "i", "region": 5})}, "'region'"),
    ],
)
def test_missing_or_malformed_field_is_named(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SettingsError) as info:
        _parse(_conn(**overrides))
    assert field in str(info.value)
    assert info.value.code == "OTSInvalidConnection"
    assert SECRET not in str(info.value)


def test_legacy_prefixed_extras_and_hook_overrides() -> None:
    conn = _conn(extra=json.dumps({"extra__tablestore__instance_name": "legacy", "region": "cn-shanghai"}))
    config = _parse(conn, region="cn-beijing", read_timeout=7)
    assert config.instance_name == "legacy"
    assert config.region == "cn-beijing"
    assert config.client_kwargs()["timeout"] == (10.0, 7.0)


def test_reprs_hide_secret_and_token() -> None:
    config = _parse(_conn(extra=json.dumps({"instance_name": "i", "sts_token": TOKEN})))
    hook = TablestoreHook("ts")
    for text in (repr(config), str(config), repr(hook)):
        assert SECRET not in text and TOKEN not in text
    assert "LTAIexample" in repr(config)


def test_hook_params_are_the_complete_constructor_configuration() -> None:
    """Everything the hook constructor accepts must reach the trigger (hook_params), nothing less."""
    import inspect

    hook = TablestoreTunnelHook("other", region="cn-beijing", connect_timeout=2.0, read_timeout=9.0)
    params = inspect.signature(TablestoreBaseHook.__init__).parameters
    assert set(hook.hook_params) == set(params) - {"self"}
    rebuilt = TablestoreTunnelHook(**json.loads(json.dumps(hook.hook_params)))
    assert rebuilt.hook_params == hook.hook_params


# -- masking ----------------------------------------------------------------------------------------


def test_hook_registers_secret_and_sts_token_with_airflow_masking() -> None:
    secret, token = "hook-only-secret-9f8e7d6c", "hook-only-token-1a2b3c4d"
    hook = TablestoreHook("ts")
    # Values that never went through an Airflow Connection: only the hook can have registered them.
    hook._register(ConnectionSettings(endpoint="https://h", access_key_id="LTAIx", access_key_secret=secret,
                                      instance_name="i", sts_token=token))
    redacted = redact(f"key={secret} token={token} id=LTAIx")
    assert secret not in redacted and token not in redacted
    assert "***" in redacted and "LTAIx" in redacted


def test_get_config_from_env_connection_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    secret, token = "env-secret-55aa55aa55", "env-sts-token-77bb77bb"
    monkeypatch.setenv("AIRFLOW_CONN_TS_MASK", json.dumps({
        "conn_type": "tablestore", "host": "http://127.0.0.1:1", "login": "id", "password": secret,
        "extra": {"instance_name": "i", "sts_token": token},
    }))
    config = TablestoreHook("ts_mask").get_config()
    assert config.access_key_secret == secret and config.sts_token == token
    assert redact(f"{secret}/{token}") == "***/***"


def test_async_config_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_TS_ASYNC", json.dumps({
        "conn_type": "tablestore", "host": "h.example.com", "login": "id", "password": "async-secret-123456",
        "extra": {"instance_name": "async-inst", "region": "cn-hangzhou"},
    }))
    config = asyncio.run(TablestoreTunnelHook("ts_async").aget_config())
    assert (config.endpoint, config.instance_name, config.region) == (
        "https://h.example.com", "async-inst", "cn-hangzhou")
    assert redact("async-secret-123456") == "***"


DOC_FORMS = {  # docs/airflow.md's connection forms, with values in the place of its "..."
    "uri": "tablestore://http://LTAIdoc:{secret}@127.0.0.1:8800?instance_name=emulator&sts_token={token}",
    "json": json.dumps({"conn_type": "tablestore", "host": "https://myinst.cn-hangzhou.ots.aliyuncs.com",
                        "login": "LTAIdoc", "password": "{secret}",
                        "extra": {"instance_name": "myinst", "region": "cn-hangzhou", "sts_token": "{token}",
                                  "connect_timeout": 5, "read_timeout": 30}}),
}


@pytest.mark.parametrize("form", sorted(DOC_FORMS))
def test_no_masking_warning_with_a_documented_connection_form(form: str, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Airflow registers every extra value of a connection it fetches with its log masker, and warns once per
    process ``Skipping masking for a secret as it's too short (<5 chars)`` for a short one (``protocol=http``):
    the documented forms have none (the URI form says http in its host), and the secrets are still masked."""
    from airflow.sdk._shared.secrets_masker.secrets_masker import SecretsMasker

    secret, token = "doc-form-secret-3141", "doc-form-sts-2718"

    def warned_reading(value: str) -> bool:
        monkeypatch.setattr(SecretsMasker, "_has_warned_short_secret", False)  # Airflow warns once per process
        monkeypatch.setenv("AIRFLOW_CONN_TS_FORM", value)
        capsys.readouterr()
        caplog.clear()
        config = TablestoreHook("ts_form").get_config()
        assert (config.access_key_secret, config.sts_token) == (secret, token)
        assert config.endpoint in ("http://127.0.0.1:8800", "https://myinst.cn-hangzhou.ots.aliyuncs.com")
        output = capsys.readouterr()
        return "too short" in caplog.text + output.out + output.err

    value = DOC_FORMS[form].replace("{secret}", secret).replace("{token}", token)
    assert not warned_reading(value)
    assert redact(f"{secret} {token}") == "*** ***"
    # the check can fail: a 4-character extra value (the protocol extra's "http", an instance "inst") makes
    # Airflow warn
    if form == "uri":
        short = value.replace("tablestore://http://", "tablestore://") + "&protocol=http"
    else:
        short = json.dumps(json.loads(value) | {"extra": {**json.loads(value)["extra"], "instance_name": "inst"}})
    assert warned_reading(short)


# -- against the emulator ---------------------------------------------------------------------------


def test_test_connection_ok_and_failure(tablestore_airflow_conn: str, tablestore_emulator: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = TablestoreHook(tablestore_airflow_conn).test_connection()
    assert ok, message
    assert tablestore_emulator.instance in message
    ok, message = TablestoreTunnelHook(tablestore_airflow_conn).test_connection()
    assert ok, message

    bad = json.loads(tablestore_emulator.airflow_connection_json())
    bad["password"] = "wrong-secret-value-123"
    monkeypatch.setenv("AIRFLOW_CONN_TS_BAD", json.dumps(bad))
    ok, message = TablestoreHook("ts_bad").test_connection()
    assert not ok
    assert "wrong-secret-value-123" not in message


@pytest.mark.parametrize("scheme", ["in the host", "protocol extra"])
def test_uri_connection_with_http_reaches_the_emulator(scheme: str, tablestore_emulator: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import quote, urlsplit

    where = urlsplit(tablestore_emulator.endpoint)
    credentials = (f"{quote(tablestore_emulator.access_key_id, safe='')}:"
                   f"{quote(tablestore_emulator.access_key_secret, safe='')}")
    uri = (f"tablestore://http://{credentials}@{where.hostname}:{where.port}"
           f"?instance_name={tablestore_emulator.instance}")
    if scheme == "protocol extra":
        uri = uri.replace("tablestore://http://", "tablestore://") + "&protocol=http"
    monkeypatch.setenv("AIRFLOW_CONN_TS_URI", uri)
    hook = TablestoreHook("ts_uri")
    assert hook.get_config().endpoint == tablestore_emulator.endpoint
    ok, message = hook.test_connection()
    assert ok, message


@pytest.mark.parametrize(("host", "protocol", "expected"), [
    ("127.0.0.1", "http", "http://127.0.0.1:8800"),
    ("h.example.com", "https", "https://h.example.com:8800"),
    ("http://127.0.0.1", "http", "http://127.0.0.1:8800"),
])
def test_protocol_extra_sets_the_scheme_of_a_bare_host(host: str, protocol: str, expected: str) -> None:
    assert normalize_endpoint(host, 8800, protocol) == expected


@pytest.mark.parametrize(("host", "protocol", "fragment"), [
    ("127.0.0.1", "ftp", "must be http or https"),
    ("https://h.example.com", "http", "keep one of them"),
])
def test_bad_protocol_is_named(host: str, protocol: str, fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        normalize_endpoint(host, None, protocol)


def test_table_hook_helpers(tablestore_airflow_conn: str, tablestore_client: Any) -> None:
    from airflow_helpers import simple_schema, unique

    hook = TablestoreHook(tablestore_airflow_conn)
    name = unique("hook_t")
    assert hook.describe_table(name) is None
    hook.create_table(simple_schema(name))
    assert name in tablestore_client.list_tables()
    assert hook.describe_table(name) is not None
    assert hook.dataset_uri(name).endswith(f"/{name}") and hook.dataset_uri(name).startswith("tablestore://")
    assert hook.delete_table(name) is True
    assert hook.delete_table(name) is False
    assert name not in tablestore_client.list_tables()
    hook.close()


def test_hook_as_a_context_manager_closes_its_client(tablestore_airflow_conn: str) -> None:
    with TablestoreTunnelHook(tablestore_airflow_conn) as hook:
        client = hook.get_conn()
        assert hook.get_conn() is client  # cached inside the block
        hook.get_conn().list_tunnels()
    assert hook._client is None  # closed on leaving; a later get_conn() builds a new client
    with pytest.raises(RuntimeError), TablestoreHook(tablestore_airflow_conn) as table_hook:
        table_hook.get_conn()
        raise RuntimeError("the block fails")
    assert table_hook._client is None  # closed on the way out of a failing block too


def test_tunnel_hook_helpers(tablestore_airflow_conn: str, stream_table: str,
                             tablestore_tunnel_client: Any) -> None:
    hook = TablestoreTunnelHook(tablestore_airflow_conn)
    assert hook.find_tunnel(stream_table, "nope") is None
    tunnel_id = hook.create_tunnel(stream_table, "tun", TunnelType.STREAM)
    assert tablestore_tunnel_client.describe_tunnel(stream_table, "tun").tunnel.tunnel_id == tunnel_id
    # the tunnel's own consume point, as the client reads it (nothing consumed: no consumer runs here)
    assert hook.get_consume_point(stream_table, "tun") == \
        tablestore_tunnel_client.describe_tunnel(stream_table, "tun").consume_point_ns
    check = hook.check_consume_point(stream_table, "tun", to_epoch_ns(datetime(2999, 1, 1)))
    assert not check.done and check.tunnel_id == tunnel_id
    assert hook.delete_tunnel(stream_table, "tun") is True
    assert hook.delete_tunnel(stream_table, "tun") is False
    with pytest.raises(TunnelNotFoundError):
        hook.check_consume_point(stream_table, "tun", 1)


# -- consume-point rule -----------------------------------------------------------------------------


def _description(kind: TunnelType, statuses: list[ChannelStatus], point: int,
                 expired: bool = False) -> TunnelDescription:
    info = TunnelInfo("tid", "tn", "tbl", "inst", kind, TunnelStage.PROCESS_STREAM, "sid", expired=expired)
    channels = tuple(
        ChannelInfo(f"c{i}", "Stream", status, None, point, 0) for i, status in enumerate(statuses)
    )
    return TunnelDescription(info, channels, point)


def test_stream_tunnel_done_once_consume_point_reaches_cutoff() -> None:
    desc = _description(TunnelType.STREAM, [ChannelStatus.OPEN], 2_000)
    assert evaluate_consume_point(desc, 2_000).done
    assert not evaluate_consume_point(desc, 2_001).done
    opening = _description(TunnelType.BASE_AND_STREAM, [ChannelStatus.OPEN], 0)
    assert not evaluate_consume_point(opening, 0).done


def test_base_data_tunnel_done_when_all_channels_terminated() -> None:
    terminated = [ChannelStatus.TERMINATED, ChannelStatus.TERMINATED]
    assert evaluate_consume_point(_description(TunnelType.BASE_DATA, terminated, 0), 10**18).done
    assert not evaluate_consume_point(
        _description(TunnelType.BASE_DATA, [ChannelStatus.TERMINATED, ChannelStatus.OPEN], 0), 0
    ).done
    assert not evaluate_consume_point(_description(TunnelType.BASE_DATA, [], 0), 0).done


def test_expired_tunnel_raises_actionable_error() -> None:
    with pytest.raises(TunnelExpiredError, match="delete and recreate"):
        evaluate_consume_point(_description(TunnelType.STREAM, [ChannelStatus.OPEN], 5, expired=True), 1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), 1704164645_000006000),
        (datetime(2024, 1, 2, 3, 4, 5, 6), 1704164645_000006000),
        ("2024-01-02T03:04:05.000006+00:00", 1704164645_000006000),
        ("2024-01-02T03:04:05.000006Z", 1704164645_000006000),
        (1704164645, 1704164645_000000000),
        (1704164645_000, 1704164645_000000000),
        (1704164645_000_000, 1704164645_000000000),
        (1704164645_000_000_000, 1704164645_000000000),
        ("1704164645", 1704164645_000000000),
    ],
)
def test_to_epoch_ns(value: Any, expected: int) -> None:
    assert to_epoch_ns(value) == expected


# -- supported Airflow versions ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.11.0", "3.0.6", "3.1.8"])
def test_older_airflow_is_refused_in_one_actionable_line(version: str) -> None:
    from airflow_tablestore.version_compat import UnsupportedAirflowError, check_airflow_version

    with pytest.raises(UnsupportedAirflowError) as info:
        check_airflow_version(version)
    message = str(info.value)
    assert "\n" not in message and f"Airflow {version} is installed" in message and ">= 3.2.0" in message


@pytest.mark.parametrize("version", ["3.2.0", "3.3.2", "3.4.0"])
def test_supported_airflow_is_accepted(version: str) -> None:
    from airflow_tablestore.version_compat import check_airflow_version

    assert check_airflow_version(version) >= (3, 2, 0)


@pytest.mark.parametrize("module", ["airflow_tablestore.sensors.tunnel", "airflow_tablestore.operators.table",
                                    "airflow_tablestore.triggers.tunnel", "airflow_tablestore.hooks.tunnel"])
def test_importing_on_an_older_airflow_fails_first_with_one_line(module: str) -> None:
    """What a DAG parse on Airflow 3.1 meets: the version line, before any missing ``airflow.sdk`` name."""
    import subprocess
    import sys

    code = f"import airflow; airflow.__version__ = '3.1.8'; import {module}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("airflow_tablestore.version_compat.UnsupportedAirflowError: "
                           "airflow-provider-tablestore needs Apache Airflow >= 3.2.0, but Airflow 3.1.8 is "
                           "installed"), result.stderr[-2000:]


def test_hook_has_no_legacy_form_methods() -> None:
    """Airflow >= 3.2 reads the form from provider info; the deprecated hook methods would warn at import."""
    assert "get_ui_field_behaviour" not in TablestoreBaseHook.__dict__
    assert "get_connection_form_widgets" not in TablestoreBaseHook.__dict__
