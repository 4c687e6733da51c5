"""Where a job or command finds its Tablestore credentials: environment variables or a JSON file, never argv.

The one way outside Airflow: the Spark consumer, the ``tablestore`` data source and the replica verifier
(``python -m airflow_tablestore.client.verify``) read ``TABLESTORE_*`` variables (a sink or replica on another
instance: ``TABLESTORE_SINK_*``) or a credentials file. The settings themselves are
:class:`airflow_tablestore.client.settings.ConnectionSettings` (also what the Airflow hooks parse a connection
into); this module only reads and writes them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow_tablestore.client.errors import TablestoreClientError
from airflow_tablestore.client.settings import ConnectionSettings

SOURCE_PREFIX = "TABLESTORE_"
SINK_PREFIX = "TABLESTORE_SINK_"
_FIELDS = {
    "endpoint": "ENDPOINT",
    "instance_name": "INSTANCE",
    "access_key_id": "ACCESS_KEY_ID",
    "access_key_secret": "ACCESS_KEY_SECRET",
    "sts_token": "STS_TOKEN",
    "region": "REGION",
}
_REQUIRED = ("endpoint", "instance_name", "access_key_id", "access_key_secret")


class SettingsError(TablestoreClientError):
    """Missing or malformed Tablestore settings (a configuration mistake: no retry can fix it)."""


def _build(values: dict[str, Any], where: str) -> ConnectionSettings:
    missing = [name for name in _REQUIRED if not values.get(name)]
    if missing:
        raise SettingsError(
            f"missing Tablestore settings {', '.join(missing)} in {where}; set them as environment "
            "variables or in the --credentials-file JSON (never as command-line arguments)"
        )
    return ConnectionSettings(
        endpoint=str(values["endpoint"]),
        instance_name=str(values["instance_name"]),
        access_key_id=str(values["access_key_id"]),
        access_key_secret=str(values["access_key_secret"]),
        sts_token=str(values["sts_token"]) if values.get("sts_token") else None,
        region=str(values["region"]) if values.get("region") else None,
    )


def from_env(prefix: str = SOURCE_PREFIX, environ: dict[str, str] | None = None) -> ConnectionSettings:
    """Read ``<prefix>ENDPOINT``, ``INSTANCE``, ``ACCESS_KEY_ID``, ``ACCESS_KEY_SECRET`` [, ``STS_TOKEN``,
    ``REGION``]."""
    env = os.environ if environ is None else environ
    values = {name: env.get(prefix + suffix) for name, suffix in _FIELDS.items()}
    return _build(values, f"environment variables {prefix}*")


def has_env(prefix: str, environ: dict[str, str] | None = None) -> bool:
    """True when any settings variable of ``prefix`` is set (a partial set is then an error, not ignored)."""
    env = os.environ if environ is None else environ
    return any(env.get(prefix + suffix) for suffix in _FIELDS.values())


class MissingSection(SettingsError):
    """The credentials file has no object for the requested section (only then may a sink fall back)."""


def from_file(path: str | os.PathLike[str], section: str = "source") -> ConnectionSettings:
    """Read a JSON file ``{"source": {...}, "sink": {...}}`` (or one flat object used for both).

    Keys: ``endpoint``, ``instance_name`` (or ``instance``), ``access_key_id``, ``access_key_secret``,
    optional ``sts_token``, ``region``.
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
    return _build(block, f"credentials file {path} ({section})")


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
        return {name: getattr(settings, name) for name in _FIELDS if getattr(settings, name, None)}

    data = {"source": block(source)}
    if sink is not None:
        data["sink"] = block(sink)
    path = Path(directory) / "tablestore-credentials.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    return path
