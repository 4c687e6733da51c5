"""The compatibility matrix README.md claims, each cell proved in a venv of its own (``make test-compat``).

- client + emulator on Python 3.11 (with the lowest protobuf, 5.29.0), 3.12 and 3.13 (newest protobuf); the main
  suite (``make test``) covers Python 3.11 with the newest protobuf;
- the Airflow layer on the lowest supported Airflow, 3.2.0 (hooks, operators, sensor poke and deferred path with
  the real trigger, provider discovery and connection form, ``airflow dags test`` of a small DAG); the main
  suite covers the newest, 3.3.2;
- one install command: ``pip install "airflow-provider-tablestore[airflow,spark]"`` from the checkout into an
  empty venv gives one PySpark version everywhere, ``spark-submit`` of the consumer replicates a table, and a
  user's job reads it with ``spark.read.format("tablestore")`` and no registration line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .envs import EnvSpec, build, pip_versions, run_pytest

# Each test builds a venv (minutes on a cold pip cache) and runs a suite inside it: more than the 600 s default.
pytestmark = pytest.mark.timeout(3600)

CORE_TESTS = ("tests/client", "tests/emulator", "tests/protocol", "tests/test_layering.py",
              "tests/test_pytest_plugin.py", "-m", "not slow and not oracle")
AIRFLOW_TESTS = ("tests/hooks", "tests/operators", "tests/sensors", "tests/triggers", "tests/airflow",
                 "tests/test_provider_info.py", "tests/test_pytest_plugin.py")

CORE_ENVS = [
    EnvSpec("core-py3.11-protobuf-5.29.0", "3.11", ("protobuf==5.29.0",)),
    EnvSpec("core-py3.12", "3.12", ()),
    EnvSpec("core-py3.13", "3.13", ()),
]
# Airflow 3.2.0 does not cap fastapi/cadwyn; their newer releases break its execution API. Airflow's own
# constraint files (the documented way to install it) pin them; these two lines are the part that matters.
LOWEST_AIRFLOW = EnvSpec("airflow-3.2.0", "3.11", ("apache-airflow==3.2.0", "fastapi<0.137", "cadwyn<8"),
                         extras="airflow")
USER_INSTALL = EnvSpec("user-install-airflow-spark", "3.11", (), editable=False, extras="airflow,spark",
                       test_tools=False)


def _passed(result: subprocess.CompletedProcess[str]) -> str:
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert re.search(r"\d+ passed", summary), summary
    return summary


@pytest.mark.parametrize("spec", CORE_ENVS, ids=lambda s: s.name)
def test_client_and_emulator(spec: EnvSpec) -> None:
    bin_dir = build(spec)
    versions = pip_versions(bin_dir, "protobuf", "requests")
    python = subprocess.run([str(bin_dir / "python"), "-c", "import sys; print(sys.version.split()[0])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert python.startswith(spec.python + ".")
    if "protobuf==5.29.0" in spec.requirements:
        assert versions["protobuf"] == "5.29.0"
    summary = _passed(run_pytest(bin_dir, *CORE_TESTS))
    print(f"[compat] {spec.name}: Python {python}, protobuf {versions['protobuf']}: {summary}")


def test_lowest_airflow() -> None:
    bin_dir = build(LOWEST_AIRFLOW)
    versions = pip_versions(bin_dir, "apache-airflow", "apache-airflow-task-sdk")
    assert versions["apache-airflow"] == "3.2.0"
    summary = _passed(run_pytest(bin_dir, *AIRFLOW_TESTS))
    print(f"[compat] Airflow {versions['apache-airflow']} (task SDK {versions['apache-airflow-task-sdk']}): {summary}")


REPLICATE = textwrap.dedent('''
    import json, os, subprocess, sys, tempfile
    from pathlib import Path
    import pyarrow.parquet as pq
    from airflow_tablestore.client import TableClient, TunnelClient
    from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, TableSchema, StreamSpec
    from airflow_tablestore.emulator.testing import EmulatorProcess
    from airflow_tablestore.spark.consumer import application_path

    out = Path(tempfile.mkdtemp())
    with EmulatorProcess(extra_args=["--base-channel-rows", "100"]) as emu:
        with TableClient(**emu.client_kwargs) as client:
            client.create_table(TableSchema("src", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),),
                                            stream=StreamSpec(enabled=True)))
            for i in range(250):
                client.put_row("src", [("id", i)], {"v": f"row {i}"})
            TunnelClient(transport=client.transport).create_tunnel("src", "copy")
        env = dict(os.environ, TABLESTORE_ENDPOINT=emu.endpoint, TABLESTORE_INSTANCE=emu.instance,
                   TABLESTORE_ACCESS_KEY_ID=emu.access_key_id, TABLESTORE_ACCESS_KEY_SECRET=emu.access_key_secret,
                   SPARK_LOCAL_IP="127.0.0.1")
        run = subprocess.run(["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                              application_path(), "--table", "src", "--tunnel", "copy", "--phase", "full",
                              "--sink", "parquet", "--sink-path", str(out)],
                             env=env, capture_output=True, text=True, timeout=600)
        # A user's job: format("tablestore") with no registration line (Spark finds pyspark_tablestore)
        job = out / "read_job.py"
        job.write_text("from pyspark.sql import SparkSession\n"
                       "spark = SparkSession.builder.getOrCreate()\n"
                       "n = spark.read.format('tablestore').option('table', 'src').load().count()\n"
                       "print(f'READ_ROWS {n}')\n")
        read = subprocess.run(["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                               str(job)], env=env, capture_output=True, text=True, timeout=600)
    rows = sum(pq.read_table(f).num_rows for f in out.rglob("*.parquet"))
    read_rows = [line.split()[1] for line in read.stdout.splitlines() if line.startswith("READ_ROWS ")]
    print(json.dumps({"rc": run.returncode, "rows": rows, "output": run.stdout[-4000:] + run.stderr[-6000:],
                      "read_rc": read.returncode, "read_rows": read_rows,
                      "read_output": read.stdout[-2000:] + read.stderr[-4000:]}))
''')


def test_one_install_command_gives_a_consistent_spark_environment() -> None:
    bin_dir = build(USER_INSTALL)
    check = subprocess.run([str(bin_dir / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    versions = pip_versions(bin_dir, "pyspark", "pyspark-client", "pandas", "apache-airflow")
    files = subprocess.run([str(bin_dir / "python"), "-c", "import pyspark; print(pyspark.__version__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert versions["pyspark"] == versions["pyspark-client"] == files, (versions, files)
    assert int(versions["pandas"].split(".")[0]) < 3, versions  # PySpark warns on pandas >= 3
    # the demo drives the repository's dags/: it is repository tooling, not part of the installed package
    shipped = subprocess.run([str(bin_dir / "python"), "-c", "import importlib.util as u; "
                              "print(u.find_spec('airflow_tablestore.demo'), u.find_spec('demo'))"],
                             capture_output=True, text=True, check=True, cwd="/").stdout.split()
    assert shipped == ["None", "None"], shipped

    # What a user's shell with the venv activated finds: the venv's bin first, then the system (and Java).
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        env["PATH"] += f":{os.environ['JAVA_HOME']}/bin"
    result = subprocess.run([str(bin_dir / "python"), "-c", REPLICATE], capture_output=True, text=True,
                            timeout=900, env=env, cwd="/")
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rc"] == 0, report["output"]
    assert report["rows"] == 250, report
    assert report["read_rc"] == 0 and report["read_rows"] == ["250"], report["read_output"]
    assert "does not yet fully support pandas" not in report["output"]
    assert "inconsistent PySpark install" not in report["output"]
    print(f"[compat] one install: pyspark {versions['pyspark']} = pyspark-client = files, pandas "
          f"{versions['pandas']}, Airflow {versions['apache-airflow']}; spark-submit replicated {report['rows']} rows, "
          f"spark.read.format('tablestore') read {report['read_rows'][0]} with no registration "
          f"(Python {sys.version.split()[0]})")
