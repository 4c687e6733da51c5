"""Where a job or command finds its Tablestore credentials: environment variables or a JSON file, never argv.

The one way outside Airflow: the Spark consumer, the ``tablestore`` data source and the replica verifier
(``python -m airflow_tablestore.client.verify``) read ``TABLESTORE_*`` variables (a sink or replica on another
instance: ``TABLESTORE_SINK_*``) or a credentials file. The settings themselves are
:class:`airflow_tablestore.client.settings.ConnectionSettings` (also what the Airflow hooks parse a connection
into), checked by its one parser :func:`~airflow_tablestore.client.settings.parse_settings`; this module only
finds, reads and writes them, every setting of it (the timeouts too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_tablestore.client.settings import (
    REQUIRED_SETTINGS,
    SETTING_NAMES,
    ConnectionSettings,
    SettingsError,
    parse_settings,
)

SOURCE_PREFIX = "TABLESTORE_"
SINK_PREFIX = "TABLESTORE_SINK_"
_ENV_SUFFIXES = {
    "endpoint": "ENDPOINT",
    "instance_name": "INSTANCE",
    "access_key_id": "ACCESS_KEY_ID",
    "access_key_secret": "ACCESS_KEY_SECRET",
    "sts_token": "STS_TOKEN",
    "region": "REGION",
    "connect_timeout": "CONNECT_TIMEOUT",
    "read_timeout": "READ_TIMEOUT",
}
_HINT = "; set them as environment variables or in the --credentials-file JSON (never as command-line arguments)"


def from_env(prefix: str = SOURCE_PREFIX, environ: Mapping[str, str] | None = None) -> ConnectionSettings:
    """Read ``<prefix>ENDPOINT``, ``INSTANCE``, ``ACCESS_KEY_ID``, ``ACCESS_KEY_SECRET`` [, ``STS_TOKEN``,
    ``REGION``, ``CONNECT_TIMEOUT``, ``READ_TIMEOUT`` (seconds)]."""
    env = os.environ if environ is None else environ
    values = {name: env.get(prefix + suffix) for name, suffix in _ENV_SUFFIXES.items()}
    # a missing setting is named as the file names it (one message for both); a malformed one by its variable
    labels = {name: name if name in REQUIRED_SETTINGS else prefix + suffix for name, suffix in _ENV_SUFFIXES.items()}
    return parse_settings(values, where=f"environment variables {prefix}*", hint=_HINT, labels=labels)


def has_env(prefix: str, environ: Mapping[str, str] | None = None) -> bool:
    """True when any settings variable of ``prefix`` is set (a partial set is then an error, not ignored)."""
    env = os.environ if environ is None else environ
    return any(env.get(prefix + suffix) for suffix in _ENV_SUFFIXES.values())


class MissingSection(SettingsError):
    """The credentials file has no object for the requested section (only then may a sink fall back)."""


def from_file(path: str | os.PathLike[str], section: str = "source") -> ConnectionSettings:
    """Read a JSON file ``{"source": {...}, "sink": {...}}`` (or one flat object used for both).

    Keys: ``endpoint``, ``instance_name`` (or ``instance``), ``access_key_id``, ``access_key_secret``,
    optional ``sts_token``, ``region``, ``connect_timeout``, ``read_timeout`` (seconds).
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SettingsError(f"cannot read credentials file {path}: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"credentials file {path} must hold a JSON object")
    block = data.get(section, data if section == "source" or "endpoint" in data else None)
    if block is None:
        raise MissingSection(f"credentials file {path} has no {section!r} object")
    if not isinstance(block, dict):
        raise SettingsError(f"credentials file {path}: {section!r} must be a JSON object")
    if "instance" in block and "instance_name" not in block:
        block = {**block, "instance_name": block["instance"]}
    return parse_settings({name: block.get(name) for name in SETTING_NAMES},
                          where=f"credentials file {path} ({section})", hint=_HINT,
                          labels={name: name for name in SETTING_NAMES})


def load(
    *, credentials_file: str | None, section: str, env_prefix: str, fallback: ConnectionSettings | None = None
) -> ConnectionSettings:
    """Settings for ``section`` ("source" or "sink"): the file if given, else ``env_prefix`` variables, else
    ``fallback`` (a sink on the same instance as the source).

    The fallback applies only when the section is absent altogether (no object in the file, no ``env_prefix``
    variable at all). A section that is present but incomplete or malformed is an error naming what is
    missing: silently using the source's settings instead could replicate a table into itself.
    """
    if credentials_file:
        try:
            return from_file(credentials_file, section)
        except MissingSection:
            if fallback is None:
                raise
            return fallback
    if fallback is not None and not has_env(env_prefix):
        return fallback
    return from_env(env_prefix)


def _endpoint_key(endpoint: str) -> str:
    return endpoint.strip().rstrip("/").lower()


def same_instance(a: ConnectionSettings, b: ConnectionSettings) -> bool:
    """True when both settings address the same instance (endpoint and instance name)."""
    return _endpoint_key(a.endpoint) == _endpoint_key(b.endpoint) and a.instance_name == b.instance_name


def write_credentials_file(directory: str | os.PathLike[str], source: Any, sink: Any | None = None) -> Path:
    """Write ``{"source": {...}[, "sink": {...}]}`` (the :func:`from_file` format) to a new file readable only
    by this user in ``directory``; ``source``/``sink`` are objects with this module's field names (for example
    the Airflow hook's ``ConnectionSettings``). Returns its path; the caller deletes it."""
    def block(settings: Any) -> dict[str, Any]:
        return {name: getattr(settings, name) for name in SETTING_NAMES if getattr(settings, name, None)}

    data = {"source": block(source)}
    if sink is not None:
        data["sink"] = block(sink)
    path = Path(directory) / "tablestore-credentials.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    return path
