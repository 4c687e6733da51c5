"""Every shell command in README.md and docs/*.md is checked as written.

The shell blocks are extracted and each command is matched to a check. Safe commands run for real (the emulator
commands and ``make emulator`` in a temporary directory on a free port, the ``export`` lines, the pytest
invocations as ``--collect-only``). The rest are checked, not run: ``make test``/``test-compat`` are what CI
runs, ``make demo``/``lint``/``proto``/``bench``/``dist`` only expand (``make -n``) here, ``pip install`` lines name the
package and existing extras (tests/compat installs ``[airflow,spark]`` for real), and ``spark-submit`` lines
resolve the application path and parse the job's flags. A command no rule covers fails the test, so a new command
in the docs must come with a way to check it. The commands of docs/first-hour.md are run for real, as written, by
``make test-compat`` (tests/compat/test_journeys.py): here each must be one of that page's journey steps.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from compat.journey_steps import all_steps as journey_steps

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.S)


def shell_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every command of every shell block (continuations joined, comments dropped)."""
    commands = []
    for doc in DOCS:
        for block in _BLOCK.findall(doc.read_text()):
            joined = re.sub(r"\\\n\s*", " ", block)
            pending = ""
            for line in joined.splitlines():
                line = pending + line
                if line.count("'") % 2:  # a quoted value continues on the next line
                    pending = line + "\n"
                    continue
                pending = ""
                command = _strip_comment(line).strip()
                if command:
                    commands.append((doc.name, command))
    return commands


def _strip_comment(line: str) -> str:
    quoted = False
    for i, ch in enumerate(line):
        if ch == "'":
            quoted = not quoted
        elif ch == "#" and not quoted and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


# -- checks ------------------------------------------------------------------------------------------------


def _serve_until_ready(argv: list[str], cwd: Path, port: int, data_dir: Path) -> None:
    """Start a long-running emulator command, wait for its ready line, check it, stop it."""
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        output = []
        for line in proc.stdout:
            output.append(line)
            if "listening on" in line:
                break
        text = "".join(output)
        assert f"listening on http://127.0.0.1:{port}" in text, text[-3000:]
        assert (data_dir / "emulator.sqlite3").exists()
    finally:
        proc.terminate()
        proc.wait(30)


def check_emulator(command: str, tmp_path: Path) -> None:
    argv = shlex.split(command)
    port = _free_port()
    argv = [str(port) if prev == "--port" else arg for prev, arg in zip(["", *argv[:-1]], argv, strict=True)]
    data_dir = Path(argv[argv.index("--data-dir") + 1])
    if data_dir.is_absolute():  # e.g. /tmp/ots: keep the test inside its own directory
        data_dir = tmp_path / data_dir.name
        argv[argv.index("--data-dir") + 1] = str(data_dir)
    if argv[0] == "python":
        argv[0] = sys.executable
    _serve_until_ready(argv, tmp_path, port, tmp_path / data_dir)


def check_make_emulator(command: str, tmp_path: Path) -> None:
    port = _free_port()
    data_dir = tmp_path / "emulator-data"
    _serve_until_ready(["make", "-s", "emulator", f"EMULATOR_PORT={port}", f"EMULATOR_DATA={data_dir}"],
                       REPO, port, data_dir)


def check_make_target(command: str, tmp_path: Path) -> None:
    """Long-running targets: the target exists and its recipe expands (``make -n``), without running it."""
    target = shlex.split(command)[1]
    result = subprocess.run(["make", "-n", target], cwd=REPO, env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def check_pip_install(command: str, tmp_path: Path) -> None:
    """The package name and extras exist (tests/compat installs ``[airflow,spark]`` for real)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    spec = shlex.split(command)[2]
    match = re.fullmatch(r"([\w-]+)(?:\[([\w,]+)\])?", spec)
    assert match and match.group(1) == project["name"], spec
    for extra in (match.group(2) or "").split(","):
        assert not extra or extra in project["optional-dependencies"], extra


def check_export_connection(command: str, tmp_path: Path) -> None:
    """The exported connection (JSON or URI form) parses into the hook's settings (``spark_default``: names a
    master)."""
    from airflow.sdk import Connection

    from airflow_tablestore.hooks.base import parse_connection

    name = re.match(r"^export (AIRFLOW_CONN_\w+)=", command)
    assert name is not None
    result = subprocess.run(["bash", "-c", f"{command}\nprintf %s \"${name.group(1)}\""],
                            capture_output=True, text=True, check=True)
    value = result.stdout
    if value.startswith("{"):
        conn = Connection(conn_id="doc", **{k: v for k, v in json.loads(value).items() if k != "extra"},
                          extra=json.dumps(json.loads(value).get("extra", {})))
    else:
        conn = Connection.from_uri(value, conn_id="doc")
    if conn.conn_type == "spark":  # the master the Spark provider's hook resolves from it
        _check_spark_connection(name.group(1), value)
        return
    assert conn.conn_type == "tablestore"
    settings = parse_connection(conn, conn.extra_dejson)
    assert settings.instance_name and settings.endpoint.startswith(("http://", "https://"))
    if "protocol=http" in value or value.startswith("tablestore://http://"):
        assert settings.endpoint.startswith("http://"), settings.endpoint


def _check_spark_connection(variable: str, value: str) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    previous = os.environ.get(variable)
    os.environ[variable] = value
    try:
        master = SparkSubmitHook(conn_id=variable.removeprefix("AIRFLOW_CONN_").lower())._connection["master"]
    finally:
        if previous is None:
            del os.environ[variable]
        else:
            os.environ[variable] = previous
    assert re.fullmatch(r"local\[(\d+|\*)\]|spark://[\w.-]+:\d+", master), master


def check_export_airflow_setting(command: str, tmp_path: Path) -> None:
    """``AIRFLOW_HOME`` or an ``AIRFLOW__SECTION__KEY`` that Airflow's configuration knows."""
    from airflow.configuration import conf

    match = re.match(r"^export AIRFLOW__([A-Z_]+?)__([A-Z_]+)=\S+$", command)
    if command.startswith("export AIRFLOW_HOME="):
        return
    assert match, command
    section, key = match.group(1).lower(), match.group(2).lower()
    # an option without a default (execution_api_server_url) is not has_option() until set: ask its description
    described = key in conf.configuration_description.get(section, {}).get("options", {})
    assert described or conf.has_option(section, key), f"[{section}] {key} is not an Airflow setting"


def check_airflow_command(command: str, tmp_path: Path) -> None:
    """An Airflow CLI command: it exists and knows every flag the docs give it (``--help`` only)."""
    words = shlex.split(command)
    subcommand = [w for w in words[1:] if not w.startswith("-")][:2]
    if subcommand[:1] not in (["db"], ["dags"]):
        subcommand = subcommand[:1]
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "--conf":
            assert isinstance(json.loads(value), dict), value
    result = subprocess.run([sys.executable, "-m", "airflow", *subcommand, "--help"], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "AIRFLOW_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    for flag in (w for w in words if w.startswith("--")):
        assert flag in result.stdout, f"{command}: airflow {' '.join(subcommand)} has no {flag}"


def check_export_consumer(command: str, tmp_path: Path) -> None:
    result = subprocess.run(["bash", "-c", f"{command}\nenv"], capture_output=True, text=True, check=True)
    for name in ("TABLESTORE_ENDPOINT", "TABLESTORE_INSTANCE", "TABLESTORE_ACCESS_KEY_ID",
                 "TABLESTORE_ACCESS_KEY_SECRET"):
        assert f"{name}=" in result.stdout


def check_pytest(command: str, tmp_path: Path) -> None:
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/python"
    result = subprocess.run([sys.executable, *argv[1:], "--collect-only"], cwd=REPO, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


def check_export_pyspark_python(command: str, tmp_path: Path) -> None:
    """The interpreter of a venv (docs/spark.md: Spark's Python workers must be the package's Python)."""
    result = subprocess.run(["bash", "-c", f"{command}\nprintf %s \"$PYSPARK_PYTHON\""], capture_output=True,
                            text=True, check=True, cwd=tmp_path)
    assert result.stdout == f"{tmp_path}/venv/bin/python", result.stdout


def check_spark_submit(command: str, tmp_path: Path) -> None:
    """A real endpoint is needed to run it: the application path resolves and the job's flags parse."""
    from airflow_tablestore.spark.consumer.options import parse_args

    if command.startswith("spark-submit ... "):  # "the same as above, with these options"
        options = parse_args(["--table", "t", "--tunnel", "n", *shlex.split(command.removeprefix("spark-submit ... "))])
        assert options.phase and options.sink
        return
    substitution = re.search(r'\$\((python -c ".*?")\)', command)
    assert substitution, command
    path = subprocess.run(["bash", "-c", substitution.group(1)], env=_env(), capture_output=True, text=True,
                          check=True).stdout.strip()
    assert Path(path).is_file()
    options = parse_args(shlex.split(command[substitution.end():]))
    assert options.table and options.sink


def check_verify_command(command: str, tmp_path: Path) -> None:
    """The replica verifier's command: its flags parse (tests/client/test_verify_replica.py runs it for real)."""
    from airflow_tablestore.client.verify.__main__ import parser

    args = parser().parse_args(shlex.split(command)[3:])
    assert args.source_table and args.replica_table


RULES: list[tuple[str, Callable[[str, Path], None]]] = [
    (r"^(tablestore-emulator|python -m airflow_tablestore\.emulator) ", check_emulator),
    (r"^make emulator$", check_make_emulator),
    (r"^make (demo|test|test-fast|test-compat|test-journeys|test-crash|lint|proto|bench|dist)$", check_make_target),
    (r"^pip install ", check_pip_install),
    (r"^export AIRFLOW_CONN_\w+=", check_export_connection),
    (r"^export AIRFLOW_(HOME|_\w+)=", check_export_airflow_setting),
    (r"^airflow (db migrate|api-server|scheduler|dag-processor|triggerer|dags (unpause|trigger|list-runs))\b",
     check_airflow_command),
    (r"^export TABLESTORE_", check_export_consumer),
    (r"^export PYSPARK_PYTHON=", check_export_pyspark_python),
    (r"^\.venv/bin/python -m pytest ", check_pytest),
    (r"^spark-submit ", check_spark_submit),
    (r"^python -m airflow_tablestore\.client\.verify ", check_verify_command),
]


def _rule(command: str) -> Callable[[str, Path], None] | None:
    return next((check for pattern, check in RULES if re.search(pattern, command)), None)


JOURNEYS_DOC = "first-hour.md"  # run by tests/compat/test_journeys.py, from the built wheel
COMMANDS = shell_commands()


def test_the_docs_have_commands() -> None:
    assert any(cmd == "make demo" for _, cmd in COMMANDS) and any(cmd == "make test" for _, cmd in COMMANDS)


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}:{c[:50]}" for d, c in COMMANDS])
def test_command_works_as_written(doc: str, command: str, tmp_path: Path) -> None:
    if doc == JOURNEYS_DOC:  # each block of that page is a journey step, run as written
        assert any(command in re.sub(r"\\\n\s*", " ", step.text) for step in journey_steps()), command
        return
    check = _rule(command)
    assert check is not None, f"{doc}: no check covers `{command}`: add a rule to tests/test_docs_commands.py"
    check(command, tmp_path)
