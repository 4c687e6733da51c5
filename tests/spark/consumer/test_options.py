"""Command-line parsing and credential loading of the consumer job."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablestore.client import credentials as settings
from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.spark.consumer.options import OptionsError, parse_args, parse_cutoff

BASE = ["--table", "src", "--tunnel", "t"]


def test_incremental_parquet_options() -> None:
    opts = parse_args([*BASE, "--phase", "incremental", "--cutoff", "2026-11-21T12:00:00Z",
                       "--sink", "parquet", "--sink-path", "/tmp/x", "--records-per-channel", "10",
                       "--max-parallel-channels", "3", "--tasks-per-round", "5"])
    assert opts.phase == "incremental" and opts.sink == "parquet" and opts.sink_path == "/tmp/x"
    assert opts.cutoff == datetime(2026, 11, 21, 12, tzinfo=UTC)
    assert opts.cutoff_us == int(datetime(2026, 11, 21, 12, tzinfo=UTC).timestamp()) * 1_000_000
    assert opts.records_per_channel == 10 and opts.max_parallel_channels == 3 and opts.tasks_per_round == 5
    assert parse_args([*BASE, "--phase", "full", "--sink", "parquet", "--sink-path", "p"]).tasks_per_round == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--phase", "incremental", "--sink", "parquet", "--sink-path", "p"], "--cutoff"),
        (["--phase", "full", "--sink", "tablestore"], "--sink-table"),
        (["--phase", "full", "--sink", "parquet"], "--sink-path"),
        (["--phase", "full", "--sink", "parquet", "--sink-path", "p", "--heartbeat-interval", "90"],
         "--heartbeat-interval"),
    ],
)
def test_inconsistent_options_are_rejected(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        parse_args([*BASE, *argv])


def test_unknown_phase_and_bad_numbers_are_rejected() -> None:
    with pytest.raises(OptionsError):
        parse_args([*BASE, "--phase", "both", "--sink", "parquet", "--sink-path", "p"])
    with pytest.raises(OptionsError):
        parse_args([*BASE, "--phase", "full", "--sink", "parquet", "--sink-path", "p", "--records-per-channel", "0"])


def test_no_credential_arguments_exist() -> None:
    with pytest.raises(OptionsError):
        parse_args([*BASE, "--phase", "full", "--sink", "parquet", "--sink-path", "p", "--access-key-secret", "s"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T12:00:00+00:00", datetime(2026, 11, 21, 12, tzinfo=UTC)),
        ("2026-11-21T14:00:00+02:00", datetime(2026, 11, 21, 12, tzinfo=UTC)),
        ("2026-11-21T12:00:00", datetime(2026, 11, 21, 12, tzinfo=UTC)),
        ("2026-11-21T12:00:00.5Z", datetime(2026, 11, 21, 12, 0, 0, 500000, tzinfo=UTC)),
    ],
)
def test_parse_cutoff(text: str, expected: datetime) -> None:
    assert parse_cutoff(text) == expected


def test_parse_cutoff_rejects_garbage() -> None:
    with pytest.raises(OptionsError, match="is not a time: give an ISO-8601 time"):
        parse_cutoff("yesterday")


ENV = {
    "TABLESTORE_ENDPOINT": "http://127.0.0.1:1", "TABLESTORE_INSTANCE": "inst",
    "TABLESTORE_ACCESS_KEY_ID": "id", "TABLESTORE_ACCESS_KEY_SECRET": "very-secret-value",
    "TABLESTORE_STS_TOKEN": "sts-token-value",
}


def test_settings_from_env_mask_secrets() -> None:
    s = settings.from_env(environ=ENV)
    assert (s.endpoint, s.instance_name, s.access_key_id) == ("http://127.0.0.1:1", "inst", "id")
    assert s.access_key_secret == "very-secret-value" and s.sts_token == "sts-token-value"
    assert "very-secret-value" not in repr(s) and "sts-token-value" not in repr(s)
    assert "very-secret-value" not in str(s)


def test_settings_missing_values_name_them() -> None:
    with pytest.raises(TablestoreClientError, match="access_key_secret") as info:
        settings.from_env(environ={k: v for k, v in ENV.items() if k != "TABLESTORE_ACCESS_KEY_SECRET"})
    assert "sts-token-value" not in str(info.value)


def test_sink_falls_back_to_source_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(ENV):
        monkeypatch.delenv(key.replace("TABLESTORE_", "TABLESTORE_SINK_"), raising=False)
    source = settings.from_env(environ=ENV)
    assert settings.load(credentials_file=None, section="sink", env_prefix="TABLESTORE_SINK_",
                         fallback=source) is source
    monkeypatch.setenv("TABLESTORE_SINK_ENDPOINT", "http://other:2")
    monkeypatch.setenv("TABLESTORE_SINK_INSTANCE", "other")
    monkeypatch.setenv("TABLESTORE_SINK_ACCESS_KEY_ID", "id2")
    monkeypatch.setenv("TABLESTORE_SINK_ACCESS_KEY_SECRET", "secret2")
    sink = settings.load(credentials_file=None, section="sink", env_prefix="TABLESTORE_SINK_", fallback=source)
    assert sink.endpoint == "http://other:2" and sink.instance_name == "other"


def test_settings_from_file(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({
        "source": {"endpoint": "http://a:1", "instance": "a", "access_key_id": "i", "access_key_secret": "s"},
        "sink": {"endpoint": "http://b:1", "instance_name": "b", "access_key_id": "j", "access_key_secret": "t"},
    }))
    assert settings.from_file(path, "source").instance_name == "a"
    assert settings.from_file(path, "sink").endpoint == "http://b:1"
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"endpoint": "http://a:1", "instance": "a", "access_key_id": "i",
                                "access_key_secret": "s"}))
    assert settings.from_file(flat, "sink").endpoint == "http://a:1"
    with pytest.raises(TablestoreClientError, match="cannot read"):
        settings.from_file(tmp_path / "missing.json")


# -- a sink configuration mistake fails before any write (never falls back to the source) --------------


def test_incomplete_sink_variables_are_an_error_not_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    source = settings.from_env(environ=ENV)
    monkeypatch.setenv("TABLESTORE_SINK_INSTANCE", "other")  # the endpoint (and the rest) forgotten
    with pytest.raises(TablestoreClientError, match="endpoint") as info:
        settings.load(credentials_file=None, section="sink", env_prefix="TABLESTORE_SINK_", fallback=source)
    assert "TABLESTORE_SINK_" in str(info.value) and "very-secret-value" not in str(info.value)


def test_malformed_sink_section_is_an_error_not_the_source(tmp_path: Path) -> None:
    source = settings.from_env(environ=ENV)
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({
        "source": {"endpoint": "http://a:1", "instance": "a", "access_key_id": "i", "access_key_secret": "s"},
        "sink": {"endpoint": "http://b:1", "instance_name": "b", "access_key_id": "j"},  # secret forgotten
    }))
    with pytest.raises(TablestoreClientError, match="access_key_secret"):
        settings.load(credentials_file=str(path), section="sink", env_prefix="TABLESTORE_SINK_", fallback=source)
    path.write_text(json.dumps({"source": {"endpoint": "http://a:1", "instance": "a", "access_key_id": "i",
                                           "access_key_secret": "s"}, "sink": "b"}))
    with pytest.raises(TablestoreClientError, match="must be a JSON object"):
        settings.load(credentials_file=str(path), section="sink", env_prefix="TABLESTORE_SINK_", fallback=source)
    path.write_text(json.dumps({"source": {"endpoint": "http://a:1", "instance": "a", "access_key_id": "i",
                                           "access_key_secret": "s"}}))  # no sink at all: same instance
    assert settings.load(credentials_file=str(path), section="sink", env_prefix="TABLESTORE_SINK_",
                         fallback=source) is source


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:1", "HTTP://127.0.0.1:1/"])
def test_a_sink_that_is_the_source_table_is_refused_before_spark_starts(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, endpoint: str) -> None:
    from airflow_tablestore.spark.consumer.job import run

    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TABLESTORE_SINK_ENDPOINT", endpoint)
    monkeypatch.setenv("TABLESTORE_SINK_INSTANCE", "inst")
    monkeypatch.setenv("TABLESTORE_SINK_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("TABLESTORE_SINK_ACCESS_KEY_SECRET", "other-secret")

    def no_spark() -> None:
        raise AssertionError("Spark must not start for a refused sink")

    code = run([*BASE, "--phase", "full", "--sink", "tablestore", "--sink-table", "src"], spark_factory=no_spark)
    assert code == 3  # permanent: the Airflow task fails without retries
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "the sink is the source table itself (src on instance inst" in message


def test_missing_settings_are_a_permanent_exit(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    from airflow_tablestore.spark.consumer.job import PERMANENT_EXIT_CODES, run

    for key in ENV:
        monkeypatch.delenv(key, raising=False)
    code = run([*BASE, "--phase", "full", "--sink", "parquet", "--sink-path", "/tmp/x"], spark_factory=lambda: None)
    assert code in PERMANENT_EXIT_CODES
    assert any("missing Tablestore settings" in r.getMessage() for r in caplog.records)
