"""The official ``tablestore`` SDK as a test oracle, isolated in its own virtualenv.

The SDK pins ``protobuf<6``, so it never goes into the project's ``.venv``. :func:`ensure_oracle_venv` creates
(or reuses) ``.oracle-venv`` at the repository root with ``tablestore==6.4.8`` from PyPI, and
:func:`run_in_oracle` runs a script with that interpreter. Used by the PlainBuffer benchmark and by the
conformance tests in ``tests/conformance``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
ORACLE_VENV = REPO_ROOT / ".oracle-venv"
SDK_VERSION = "6.4.8"
SDK_REQUIREMENT = f"tablestore=={SDK_VERSION}"


class OracleUnavailable(RuntimeError):
    """The oracle venv could not be created (typically: PyPI is unreachable)."""


def oracle_python(venv: Path = ORACLE_VENV) -> Path:
    """Path of the oracle venv's interpreter (it may not exist yet)."""
    return venv / "bin" / "python"


def _sdk_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('tablestore'))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_oracle_venv(venv: Path = ORACLE_VENV) -> Path:
    """Create or reuse the oracle venv with ``tablestore==6.4.8``; return its interpreter path.

    Raises :class:`OracleUnavailable` with pip's output when the SDK cannot be installed.
    """
    python = oracle_python(venv)
    if _sdk_version(python) == SDK_VERSION:
        return python
    # parallel test workers: one creates the venv, the others wait for it and then find it ready
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _create_oracle_venv(venv, python)


def _create_oracle_venv(venv: Path, python: Path) -> Path:
    if _sdk_version(python) == SDK_VERSION:
        return python
    if not python.exists():
        log.info("creating the oracle venv at %s", venv)
        base = getattr(sys, "_base_executable", sys.executable)
        created = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
        if created.returncode != 0:
            raise OracleUnavailable(f"cannot create {venv}: {created.stderr.strip()[-2000:]}")
    log.info("installing %s into %s (from PyPI)", SDK_REQUIREMENT, venv)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", SDK_REQUIREMENT],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if installed.returncode != 0 or _sdk_version(python) != SDK_VERSION:
        output = (installed.stdout + installed.stderr).strip()
        raise OracleUnavailable(f"cannot install {SDK_REQUIREMENT} into {venv}: {output[-2000:]}")
    return python


def run_in_oracle(
    script: Path | str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    venv: Path = ORACLE_VENV,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with the oracle interpreter (creating the venv if needed); capture text output.

    The repository root is put on ``PYTHONPATH`` so scripts can import the project's generated protobuf
    modules; the project's other dependencies are not installed there.
    """
    python = ensure_oracle_venv(venv)
    child_env = dict(os.environ)
    child_env.pop("PYTHONPATH", None)
    child_env.update(env or {})
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), child_env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        cwd=str(REPO_ROOT),
    )
