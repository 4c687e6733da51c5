"""One settings parser, one error: an Airflow connection, ``TABLESTORE_*`` variables, a credentials file and the
data source's options give the same ``ConnectionSettings`` (timeouts included), and every setting reaches the
Spark consumer and the data source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.models import Connection

from airflow_tablestore.client import credentials
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.settings import ConnectionSettings, SettingsError, parse_settings
from airflow_tablestore.hooks.base import parse_connection
from airflow_tablestore.spark.consumer.options import parse_args
from airflow_tablestore.spark.datasource.options import SourceOptions

SECRET = "s3cret-never-shown"
EXPECTED = ConnectionSettings(endpoint="http://127.0.0.1:8800", instance_name="inst", access_key_id="AKID",
                              access_key_secret=SECRET, sts_token="tok", region="cn-hangzhou",
                              connect_timeout=3.0, read_timeout=45.0)
ENV = {"TABLESTORE_ENDPOINT": "http://127.0.0.1:8800", "TABLESTORE_INSTANCE": "inst",
       "TABLESTORE_ACCESS_KEY_ID": "AKID", "TABLESTORE_ACCESS_KEY_SECRET": SECRET, "TABLESTORE_STS_TOKEN": "tok",
       "TABLESTORE_REGION": "cn-hangzhou", "TABLESTORE_CONNECT_TIMEOUT": "3", "TABLESTORE_READ_TIMEOUT": "45"}


def _connection(**extra: Any) -> Connection:
    return Connection(conn_id="ts", conn_type="tablestore", host="127.0.0.1", port=8800, login="AKID",
                      password=SECRET, extra=json.dumps({"instance_name": "inst", "protocol": "http",
                                                         "sts_token": "tok", "region": "cn-hangzhou",
                                                         "connect_timeout": 3, "read_timeout": "45", **extra}))


def test_every_source_gives_the_same_settings(tmp_path: Path) -> None:
    connection = _connection()
    assert parse_connection(connection, connection.extra_dejson) == EXPECTED
    assert credentials.from_env("TABLESTORE_", ENV) == EXPECTED
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"source": {"endpoint": "http://127.0.0.1:8800", "instance": "inst",
                                           "access_key_id": "AKID", "access_key_secret": SECRET, "sts_token": "tok",
                                           "region": "cn-hangzhou", "connect_timeout": 3, "read_timeout": 45}}))
    assert credentials.from_file(path) == EXPECTED
    options = SourceOptions.parse({"endpoint": "http://127.0.0.1:8800", "instance": "inst", "access_key_id": "AKID",
                                   "access_key_secret": SECRET, "sts_token": "tok", "region": "cn-hangzhou",
                                   "connect_timeout": "3", "read_timeout": "45", "table": "t"})
    assert options.settings == EXPECTED


@pytest.mark.parametrize(("source", "named"), [
    ("connection", "extra 'read_timeout'"),
    ("env", "TABLESTORE_READ_TIMEOUT"),
    ("file", "read_timeout"),
    ("options", "read_timeout"),
])
def test_a_bad_timeout_is_the_one_error_naming_it_as_its_source_does(tmp_path: Path, source: str,
                                                                     named: str) -> None:
    with pytest.raises(SettingsError) as info:
        if source == "connection":
            connection = _connection(read_timeout="soon")
            parse_connection(connection, connection.extra_dejson)
        elif source == "env":
            credentials.from_env("TABLESTORE_", {**ENV, "TABLESTORE_READ_TIMEOUT": "soon"})
        elif source == "file":
            path = tmp_path / "c.json"
            path.write_text(json.dumps({"endpoint": "http://h", "instance": "i", "access_key_id": "a",
                                        "access_key_secret": SECRET, "read_timeout": "soon"}))
            credentials.from_file(path)
        else:
            SourceOptions.parse({"endpoint": "http://h", "instance": "i", "access_key_id": "a",
                                 "access_key_secret": SECRET, "read_timeout": "soon", "table": "t"})
    message = str(info.value)
    assert named in message and "number of seconds" in message and SECRET not in message
    assert isinstance(info.value, TablestoreClientError) and isinstance(info.value, ValueError)
    assert info.value.code == "OTSInvalidConnection"


@pytest.mark.parametrize("values", [
    {"endpoint": "ftp://h", "instance_name": "i", "access_key_id": "a", "access_key_secret": SECRET},
    {"endpoint": "http://h", "instance_name": "i", "access_key_id": "a", "access_key_secret": SECRET,
     "connect_timeout": -1},
    {"endpoint": "http://h", "instance_name": "i", "access_key_id": "a", "access_key_secret": SECRET,
     "region": 5},
    {"endpoint": "http://h", "instance_name": "i", "access_key_id": "a"},
])
def test_parse_settings_refuses_what_no_client_could_use(values: dict[str, Any]) -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings(values, where="test")
    assert SECRET not in str(info.value) and info.value.message.startswith(("test:", "missing Tablestore settings"))


def test_the_connections_timeouts_reach_the_consumer_through_the_credentials_file(tmp_path: Path) -> None:
    """The path of TablestoreSparkSubmitOperator: the hook's settings written to the private file the job
    reads; the job's request timeout is the connection's read timeout unless --request-timeout says otherwise."""
    connection = _connection()
    settings = parse_connection(connection, connection.extra_dejson)
    path = credentials.write_credentials_file(tmp_path, settings, settings)
    assert credentials.from_file(path) == credentials.from_file(path, "sink") == settings
    base = ["--table", "t", "--tunnel", "n", "--phase", "full", "--sink", "parquet", "--sink-path", "/tmp/x"]
    assert parse_args(base).with_connection(settings).request_timeout == 45.0
    assert parse_args([*base, "--request-timeout", "7"]).with_connection(settings).request_timeout == 7.0
    assert parse_args(base).with_connection(ConnectionSettings("http://h", "i", "a", SECRET)).request_timeout == 60.0
    with settings.tunnel_client(timeout=7.0) as client:  # the job's request timeout keeps the connect timeout
        assert client.transport.timeout == (3.0, 7.0)
    with settings.table_client() as client:
        assert client.transport.timeout == (3.0, 45.0)


def test_the_data_source_takes_the_timeouts_of_a_credentials_file_and_its_own_options(tmp_path: Path) -> None:
    path = credentials.write_credentials_file(tmp_path, EXPECTED)
    options = SourceOptions.parse({"credentials_file": str(path), "table": "t"})
    assert options.settings == EXPECTED
    overridden = SourceOptions.parse({"credentials_file": str(path), "table": "t", "read_timeout": "90"})
    assert (overridden.settings.connect_timeout, overridden.settings.read_timeout) == (3.0, 90.0)
    assert SECRET not in repr(overridden)
