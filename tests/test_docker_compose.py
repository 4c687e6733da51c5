"""docker-compose.yaml: valid against the Compose Specification schema, and everything it runs or mounts exists.

No Docker here: the file is checked statically (schema, commands, mounted paths, connections, dependencies).
The schema is vendored from the docker-compose 1.29.2 wheel on PyPI (tests/data/compose_spec.NOTICE).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


def _commands() -> list[tuple[str, list[str]]]:
    out = []
    for name, svc in SERVICES.items():
        for key in ("entrypoint", "command"):
            cmd = svc.get(key)
            if cmd:
                out.append((name, cmd if isinstance(cmd, list) else cmd.split()))
        test = (svc.get("healthcheck") or {}).get("test")
        if isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL"):
            out.append((name, test[1:] if test[0] == "CMD" else test[1].split()))
    return out


def test_valid_against_the_compose_specification() -> None:
    schema = json.loads((ROOT / "tests/data/compose_spec.json").read_text())
    validator_cls = jsonschema.Draft201909Validator  # the schema's $schema (draft 2019-09)
    errors = sorted(validator_cls(schema).iter_errors(COMPOSE), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_schema_rejects_a_broken_file() -> None:
    """The validation above can fail: a typo'd service key is caught."""
    schema = json.loads((ROOT / "tests/data/compose_spec.json").read_text())
    broken = {"services": {"x": {"image": "a", "comand": ["b"]}}}
    assert list(jsonschema.Draft201909Validator(schema).iter_errors(broken))


def test_expected_services() -> None:
    assert {"emulator", "spark-master", "spark-worker", "airflow-init", "airflow-api-server", "airflow-scheduler",
            "airflow-dag-processor", "airflow-triggerer"} <= set(SERVICES)


def test_build_files_and_mounted_paths_exist() -> None:
    for name, svc in SERVICES.items():
        build = svc.get("build")
        if build:
            context = ROOT / build["context"]
            assert context.is_dir(), name
            assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in (COMPOSE.get("volumes") or {}), f"{name}: undeclared volume {source}"


def test_dockerfile_copies_existing_paths() -> None:
    for line in (ROOT / "docker/Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src


def test_depends_on_names_real_services() -> None:
    for name, svc in SERVICES.items():
        for dep in svc.get("depends_on", []):
            assert dep in SERVICES, f"{name} depends on unknown {dep}"


def _console_scripts() -> set[str]:
    names = {ep.name for ep in importlib.metadata.entry_points(group="console_scripts")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return names | set(project.get("scripts", {}))


def test_every_command_exists() -> None:
    scripts = _console_scripts()
    bin_dir = Path(sys.executable).parent
    airflow_commands = []
    for service, cmd in _commands():
        exe = cmd[0]
        if exe in ("python", "python3"):
            if cmd[1] == "-m":
                assert importlib.util.find_spec(cmd[2]) is not None, f"{service}: no module {cmd[2]}"
            continue
        if exe == "pg_isready" or SERVICES[service].get("image", "").startswith("postgres"):
            assert "build" not in SERVICES[service]  # part of the official postgres image
            continue
        if exe == "spark-class":
            assert (bin_dir / "spark-class").exists(), "pyspark's spark-class script is missing"
            _assert_spark_class(cmd[1])
            continue
        assert exe in scripts, f"{service}: {exe} is not a console script of the installed packages"
        if exe == "airflow":
            airflow_commands.append(cmd[1:])
    assert airflow_commands
    _assert_airflow_commands(airflow_commands)


def _assert_spark_class(class_name: str) -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    entry = class_name.replace(".", "/") + ".class"
    for jar in sorted(jars.glob("spark-core_*.jar")):
        with zipfile.ZipFile(jar) as zf:
            if entry in zf.namelist():
                return
    pytest.fail(f"{class_name} not found in Spark's jars")


def _assert_airflow_commands(commands: list[list[str]]) -> None:
    """Parse each ``airflow ...`` command line with Airflow's own CLI parser (nothing is executed)."""
    code = (
        "import json, sys\n"
        "from airflow.cli import cli_parser\n"
        "parser = cli_parser.get_parser()\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    ns = parser.parse_args(args)\n"
        "    assert callable(getattr(ns, 'func', None)), args\n"
        "print('ok')\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(commands)], capture_output=True, text=True,
                              timeout=120, env={"AIRFLOW_HOME": home, "PATH": str(Path(sys.executable).parent)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_connections_point_at_the_services() -> None:
    env = SERVICES["airflow-scheduler"]["environment"]
    tablestore = json.loads(env["AIRFLOW_CONN_TABLESTORE_DEFAULT"])
    assert tablestore["conn_type"] == "tablestore" and tablestore["extra"]["instance_name"]
    emulator_cmd = SERVICES["emulator"]["command"]
    port = emulator_cmd[emulator_cmd.index("--port") + 1]
    assert tablestore["host"] == f"http://emulator:{port}"
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert spark["conn_type"] == "spark" and spark["host"] == "spark://spark-master"
    master_cmd = SERVICES["spark-master"]["command"]
    assert str(spark["port"]) == master_cmd[master_cmd.index("--port") + 1]
    assert SERVICES["airflow-scheduler"]["volumes"][0].startswith("./dags:")


def test_example_dag_is_mounted_and_present() -> None:
    assert (ROOT / "dags/tablestore_replication.py").is_file()
