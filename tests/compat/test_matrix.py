"""The compatibility matrix README.md claims, each cell proved in a venv of its own (``make test-compat``).

- client + emulator on Python 3.11 with the lowest protobuf, 5.29.0 (the whole client and emulator suite), 3.12
  and 3.13 with the newest protobuf (``VERSION_TESTS``: what a Python version can break, the compiled decoder
  first); the main suite (``make test``) covers Python 3.11 with the newest protobuf;
- the Airflow layer on the lowest supported Airflow, 3.2.0 (hooks, operators, sensor poke and deferred path with
  the real trigger, provider discovery and connection form, ``airflow dags test`` of a small DAG, the Tablestore
  page's plugin loading, data and HTML); the main suite covers the newest, 3.3.2;
- the release: ``python -m build`` makes an sdist and a wheel that ``twine check`` passes, with LICENSE, NOTICE,
  the changelog and the docs where they belong and one version everywhere;
- one install command: ``pip install "airflow-provider-tablestore[airflow,spark]"`` of the built wheel into an
  empty venv gives one PySpark version everywhere, and what an installed user runs works: the
  ``tablestore-emulator`` command, the pytest plugin, ``airflow providers get`` (provider info valid against the
  installed Airflow's schema), the documented one-line enabling of the packaged DAGs parsed as Airflow parses a
  dags folder, ``spark-submit`` of the consumer replicating a table, and a user's job reading it with
  ``spark.read.format("tablestore")`` and no registration line;
- the sdist installs on its own (pip builds it) and its emulator command runs;
- the compiled PlainBuffer decoder is optional: the wheel built with a compiler ships it, an install where the C
  compiler fails (``CC=/bin/false``) still works and decodes in pure Python.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

import airflow_tablestore

from .envs import VENVS, EnvSpec, build, find_python, pip_versions, run_pytest

# Each test builds a venv (minutes on a cold pip cache) and runs a suite inside it: more than the 600 s default.
pytestmark = pytest.mark.timeout(3600)

CORE_TESTS = ("tests/client", "tests/emulator", "tests/protocol", "tests/test_layering.py",
              "tests/test_pytest_plugin.py", "-m", "not slow and not oracle")
AIRFLOW_TESTS = ("tests/hooks", "tests/operators", "tests/sensors", "tests/triggers", "tests/airflow", "tests/ui",
                 "tests/test_provider_info.py", "tests/test_pytest_plugin.py")

# What a newer Python can break in the client and the emulator: the compiled decoder (built against each Python's
# C API) and the pure-Python one, CRC-8, the generated protobuf modules, request signing, the HTTP transport and
# the emulator's HTTP server and SQLite store, the public API, one replication by the tunnel worker's threads,
# the layering (imports without Airflow or PySpark) and the pytest plugin. The rest of CORE_TESTS is pure-Python
# protocol logic that 3.11 (here, with the lowest protobuf) and `make test` already run; running it on every
# Python would take three times as long for no cell README.md claims.
VERSION_TESTS = (
    "tests/client/test_plainbuffer.py", "tests/client/test_plainbuffer_compiled.py",
    "tests/client/test_plainbuffer_modules.py", "tests/client/test_crc8.py", "tests/protocol",
    "tests/client/test_auth.py", "tests/client/test_transport.py", "tests/client/test_public_api.py",
    "tests/client/test_table_api.py", "tests/client/test_tunnel_client.py",
    "tests/client/tunnel/test_worker_replication.py", "tests/emulator/test_codec.py", "tests/emulator/test_cli.py",
    "tests/emulator/test_rows.py", "tests/emulator/test_persistence.py", "tests/emulator/test_http_errors.py",
    "tests/emulator/tunnel/test_http_protocol.py", "tests/test_layering.py", "tests/test_pytest_plugin.py",
    "-m", "not slow and not oracle")

CORE_ENVS = [
    EnvSpec("core-py3.11-protobuf-5.29.0", "3.11", ("protobuf==5.29.0",)),
    EnvSpec("core-py3.12", "3.12", ()),
    EnvSpec("core-py3.13", "3.13", ()),
]
CORE_SUITES = {"core-py3.11-protobuf-5.29.0": CORE_TESTS, "core-py3.12": VERSION_TESTS, "core-py3.13": VERSION_TESTS}
# Airflow 3.2.0 does not cap fastapi/cadwyn; their newer releases break its execution API. Airflow's own
# constraint files (the documented way to install it) pin them; these two lines are the part that matters.
LOWEST_AIRFLOW = EnvSpec("airflow-3.2.0", "3.11", ("apache-airflow==3.2.0", "fastapi<0.137", "cadwyn<8"),
                         extras="airflow")
USER_INSTALL = EnvSpec("user-install-airflow-spark", "3.11", (), editable=False, extras="airflow,spark,testing",
                       test_tools=False)
SDIST_INSTALL = EnvSpec("user-install-sdist", "3.11", (), editable=False, test_tools=False)
PACKAGE = "airflow-provider-tablestore"


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
    summary = _passed(run_pytest(bin_dir, *CORE_SUITES[spec.name]))
    print(f"[compat] {spec.name}: Python {python}, protobuf {versions['protobuf']}: {summary}")


def test_lowest_airflow() -> None:
    bin_dir = build(LOWEST_AIRFLOW)
    versions = pip_versions(bin_dir, "apache-airflow", "apache-airflow-task-sdk")
    assert versions["apache-airflow"] == "3.2.0"
    summary = _passed(run_pytest(bin_dir, *AIRFLOW_TESTS))
    print(f"[compat] Airflow {versions['apache-airflow']} (task SDK {versions['apache-airflow-task-sdk']}): {summary}")


def _metadata(text: str) -> email.message.Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def test_release_artifacts(dists: tuple[Path, Path]) -> None:
    """twine check passes on both; LICENSE, NOTICE, the changelog and the docs are where a user finds them; the
    wheel has the example DAGs, their jobs and the Spark consumer; the version of the built metadata is the
    package's ``__version__``."""
    sdist, wheel = dists
    repo = Path(__file__).resolve().parents[2]
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and check.stdout.count("PASSED") == 2, check.stdout + check.stderr
    version = airflow_tablestore.__version__

    with zipfile.ZipFile(wheel) as archive:
        info = f"airflow_provider_tablestore-{version}.dist-info"
        names = set(archive.namelist())
        meta = _metadata(archive.read(f"{info}/METADATA").decode())
        for name in ("LICENSE", "NOTICE"):
            assert archive.read(f"{info}/licenses/{name}") == (repo / name).read_bytes(), name
    # built with a compiler: a CPython- and platform-specific wheel carrying the one compiled PlainBuffer extension
    assert re.fullmatch(rf"airflow_provider_tablestore-{re.escape(version)}-cp3\d+-cp3\d+-[\w.]+\.whl", wheel.name)
    compiled = [n for n in names if re.fullmatch(r"airflow_tablestore/.+\.(so|pyd)", n)]
    assert len(compiled) == 1 and compiled[0].startswith("airflow_tablestore/client/plainbuffer/_speedups."), compiled
    assert not [n for n in names if n.endswith(".c")]
    assert {"pyspark_tablestore.py", "airflow_tablestore/py.typed", "airflow_tablestore/protocol/ots_table.proto",
            "airflow_tablestore/spark/consumer/log4j2.properties"} <= names
    # what the dags-folder lines and the DAGs' spark-submit tasks load from the installed package
    shipped = {"airflow_tablestore/example_dags/tablestore_replication.py",
               "airflow_tablestore/example_dags/tablestore_spark_job.py",
               "airflow_tablestore/example_dags/tablestore_stream_job.py",
               "airflow_tablestore/example_dags/jobs/tablestore_stream_changes.py",
               "airflow_tablestore/example_dags/jobs/tablestore_aggregate.py",
               "airflow_tablestore/spark/consumer/job.py",
               "airflow_tablestore/spark/consumer/application/tablestore_consumer.py", "pyspark_tablestore.py"}
    assert shipped <= names, sorted(shipped - names)
    assert meta["Version"] == version and meta["Name"] == PACKAGE
    assert meta["License-Expression"] == "Apache-2.0"
    assert sorted(meta.get_all("License-File") or []) == ["LICENSE", "NOTICE"]
    assert meta.get_all("Project-URL") is None  # no address that does not exist
    description = str(meta.get_payload())  # README, then CHANGELOG
    assert description.startswith("# airflow-tablestore") and f"\n## {version} — " in description

    with tarfile.open(sdist) as archive:
        top = f"airflow_provider_tablestore-{version}"
        files = {m.name.removeprefix(top + "/") for m in archive.getmembers() if m.isfile()}
        pkg_info = _metadata(archive.extractfile(f"{top}/PKG-INFO").read().decode())  # type: ignore[union-attr]
        for name in ("LICENSE", "NOTICE", "CHANGELOG.md"):
            assert archive.extractfile(f"{top}/{name}").read() == (repo / name).read_bytes(), name  # type: ignore[union-attr]
    docs = {f"docs/{path.name}" for path in (repo / "docs").glob("*.md")}
    assert {"README.md", "BENCHMARKS.md", "pyproject.toml", "pyspark_tablestore.py"} | docs <= files, docs - files
    assert {f"airflow_tablestore/client/plainbuffer/{name}" for name in ("_speedups.c", "_arrow.c", "_parse.h",
                                                                         "_records.h")} <= files
    assert not [name for name in files if name.startswith("tests/")]  # the suite needs the repository
    assert pkg_info["Version"] == version
    print(f"[compat] release {version}: twine check passed on {sdist.name} and {wheel.name}; LICENSE, NOTICE in "
          f"both, CHANGELOG and {len(docs)} docs in the sdist")


def test_install_without_a_c_compiler_uses_pure_python(dists: tuple[Path, Path]) -> None:
    """pip builds the sdist where the C compiler fails (CC=/bin/false): the install succeeds without the compiled
    decoder, ``IMPLEMENTATION`` says ``"python"`` and a decode round trip works."""
    sdist, _ = dists
    root = VENVS / "no-c-compiler"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([find_python("3.11"), "-m", "venv", str(root)], check=True)
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false", "LDSHARED": "/bin/false"}
    env.pop("TABLESTORE_PLAINBUFFER", None)
    # no wheel cache: a wheel pip built earlier from the same sdist, with a compiler, would be reused
    install = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir",
                              "--disable-pip-version-check", str(sdist)], env=env, capture_output=True, text=True)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    probe = textwrap.dedent("""
        import airflow_tablestore.client.plainbuffer.implementation as pb
        from airflow_tablestore.client.model import Column, Row, SequenceInfo
        from airflow_tablestore.client.plainbuffer.decode import decode_record_list, decode_rows
        from airflow_tablestore.client.plainbuffer.encode import encode_row, encode_rows
        rows = [Row((("id", 1),), (Column("a", "x", 5), Column("b", 1.5, 6)), False, SequenceInfo(0, 7, 0))]
        assert decode_rows(encode_rows(rows)) == rows and decode_record_list([encode_row(rows[0])]) == rows
        print(pb.IMPLEMENTATION, pb.__file__)
    """)
    done = subprocess.run([str(root / "bin" / "python"), "-c", probe], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    implementation, location = done.stdout.split()
    assert implementation == "python" and Path(location).is_relative_to(root), done.stdout
    assert not list(root.rglob("*_speedups*.so"))
    print(f"[compat] {sdist.name} with CC=/bin/false: installed, pure-Python decoder, round trip ok", flush=True)


def test_sdist_installs_on_its_own(dists: tuple[Path, Path]) -> None:
    """pip builds the sdist (no wheel given) in an empty venv: the package imports and the emulator command runs."""
    sdist, _ = dists
    bin_dir = build(SDIST_INSTALL, sdist)
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "import importlib.metadata as m, importlib.util as u, json, airflow_tablestore; "
         "assert u.find_spec('pyspark_tablestore'); "  # importing it needs the spark extra
         f"print(json.dumps([m.version({PACKAGE!r}), airflow_tablestore.__version__, "
         "json.loads(m.distribution('airflow-provider-tablestore').read_text('direct_url.json'))['url']]))"],
        capture_output=True, text=True, env=env, cwd="/", timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    installed, module_version, url = json.loads(probe.stdout)
    assert installed == module_version == airflow_tablestore.__version__ and url.endswith(sdist.name), probe.stdout
    helped = subprocess.run([str(bin_dir / "tablestore-emulator"), "--help"], capture_output=True, text=True,
                            env=env, cwd="/", timeout=120)
    assert helped.returncode == 0 and "--data-dir" in helped.stdout, helped.stdout + helped.stderr
    print(f"[compat] sdist {sdist.name}: installed by pip on its own, imports, tablestore-emulator --help runs")


SIGNED_REQUEST = textwrap.dedent('''
    import json, sys
    from airflow_tablestore.client import TableClient
    from airflow_tablestore.client.errors import AuthError
    endpoint, instance = sys.argv[1:]
    with TableClient(endpoint, "emulator-access-key-id", "emulator-access-key-secret", instance) as client:
        tables = client.list_tables()
    try:
        with TableClient(endpoint, "emulator-access-key-id", "not-the-secret", instance) as client:
            client.list_tables()
        refused = None
    except AuthError as exc:
        refused = exc.code
    print(json.dumps({"tables": list(tables), "refused": refused}))
''')


def _check_emulator_command(bin_dir: Path, env: dict[str, str], tmp_path: Path) -> str:
    """``tablestore-emulator`` as README shows it: its ready line, a signed request served, a forged one refused,
    a clean stop on SIGTERM."""
    data_dir = tmp_path / "emulator-data"
    proc = subprocess.Popen([str(bin_dir / "tablestore-emulator"), "--port", "0", "--data-dir", str(data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    output: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if "listening on" in line:
                break
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+) instance=(\S+)", "".join(output))
        assert match, "".join(output)[-3000:]
        request = subprocess.run([str(bin_dir / "python"), "-c", SIGNED_REQUEST, *match.groups()],
                                 capture_output=True, text=True, env=env, cwd="/", timeout=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(30)
    assert request.returncode == 0, request.stderr[-3000:]
    assert json.loads(request.stdout) == {"tables": [], "refused": "OTSAuthFailed"}, request.stdout
    assert returncode == 0 and (data_dir / "emulator.sqlite3").exists(), (returncode, "".join(output)[-3000:])
    return match.group(1)


PLUGIN_TEST = textwrap.dedent('''
    import sys
    from pathlib import Path

    import airflow_tablestore
    from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, TableSchema


    def test_round_trip_on_the_plugin_emulator(tablestore_client):
        assert Path(airflow_tablestore.__file__).is_relative_to(sys.prefix)  # the installed wheel
        tablestore_client.create_table(TableSchema("orders", (PrimaryKeyColumn("id", PrimaryKeyType.INTEGER),)))
        tablestore_client.put_row("orders", [("id", 1)], {"status": "new"})
        assert "orders" in tablestore_client.list_tables()
        assert tablestore_client.get_row("orders", [("id", 1)]) is not None
''')


def _check_pytest_plugin(bin_dir: Path, env: dict[str, str], tmp_path: Path) -> str:
    """A user's test files, no conftest, pytest from the ``testing`` extra: the ``tablestore_client`` fixture
    comes from the installed plugin, and docs/emulator.md's DAG test passes with no Airflow set-up."""
    from test_plugin_dag_test import doc_test_file

    tests = tmp_path / "user_tests"
    tests.mkdir()
    (tests / "test_with_emulator.py").write_text(PLUGIN_TEST)
    (tests / "test_my_dag.py").write_text(doc_test_file())
    result = subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                             str(tests), str(tests)], capture_output=True, text=True, env=env, cwd=tests, timeout=300)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0 and re.fullmatch(r"2 passed.* in .*", summary), \
        result.stdout[-4000:] + result.stderr
    return summary


VALIDATE_PROVIDER_INFO = textwrap.dedent('''
    import importlib.metadata, importlib.util, json, sys
    from pathlib import Path
    import jsonschema
    spec = importlib.util.find_spec("airflow")
    schema = json.loads((Path(spec.origin).parent / "provider_info.schema.json").read_text())
    (listed,) = json.loads(sys.stdin.read())
    jsonschema.validate(listed, schema)  # what `airflow providers get --full` shows
    (entry,) = [e for e in importlib.metadata.entry_points(group="apache_airflow_provider")
                if e.value.startswith("airflow_tablestore.")]
    jsonschema.validate(entry.load()(), schema)  # what the entry point returns
    print(json.dumps({"package": listed["package-name"], "versions": listed["versions"],
                      "documentation-url": listed.get("documentation-url")}))
''')


def _check_airflow_providers_get(bin_dir: Path, env: dict[str, str], tmp_path: Path) -> None:
    """``airflow providers get`` finds the provider; its info is valid against the installed Airflow's schema."""
    airflow_env = dict(env, AIRFLOW_HOME=str(tmp_path / "airflow_home"))
    shown = subprocess.run([str(bin_dir / "airflow"), "providers", "get", PACKAGE, "-o", "json", "--full"],
                           capture_output=True, text=True, env=airflow_env, cwd=tmp_path, timeout=300)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    listing = next(line for line in reversed(shown.stdout.splitlines()) if line.startswith("["))
    checked = subprocess.run([str(bin_dir / "python"), "-c", VALIDATE_PROVIDER_INFO], input=listing,
                             capture_output=True, text=True, env=airflow_env, cwd=tmp_path, timeout=300)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert json.loads(checked.stdout) == {"package": PACKAGE, "versions": [airflow_tablestore.__version__],
                                          "documentation-url": None}, checked.stdout


def _check_airflow_plugins(bin_dir: Path, env: dict[str, str], tmp_path: Path) -> None:
    """``airflow plugins`` lists the Tablestore page, registered by the installed wheel's entry point alone."""
    airflow_env = dict(env, AIRFLOW_HOME=str(tmp_path / "airflow_home_plugins"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    shown = subprocess.run([str(bin_dir / "airflow"), "plugins", "-o", "json"], capture_output=True, text=True,
                           env=airflow_env, cwd=tmp_path, timeout=300)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    listing = json.loads(next(line for line in reversed(shown.stdout.splitlines()) if line.startswith("[")))
    [plugin] = [p for p in listing if p["name"] == "tablestore"]
    assert plugin["source"].startswith(f"{PACKAGE}=={airflow_tablestore.__version__}: EntryPoint"), plugin["source"]
    assert [(v["name"], v["url_route"]) for v in plugin["external_views"]] == [("Tablestore", "tablestore")]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/tablestore"]
    assert not (tmp_path / "airflow_home_plugins" / "plugins").exists() or not any(
        (tmp_path / "airflow_home_plugins" / "plugins").iterdir())  # nothing copied into plugins/


PARSE_DAGS_FOLDER = textwrap.dedent('''
    import json, os
    from pathlib import Path
    from airflow.dag_processing.dagbag import DagBag
    import airflow_tablestore.example_dags as example_dags
    folder = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    bag = DagBag(dag_folder=folder, safe_mode=True, bundle_path=folder)  # as the DAG processor parses a bundle
    print(json.dumps({"errors": {str(k): str(v) for k, v in bag.import_errors.items()},
                      "dags": {i: [d.fileloc, d.relative_fileloc] for i, d in bag.dags.items()},
                      "module": example_dags.__file__}))
''')


def _check_dags_folder_lines(bin_dir: Path, env: dict[str, str], tmp_path: Path) -> list[str]:
    """The documented one-line enabling of each packaged DAG, in a dags folder of the user's, parsed as Airflow
    parses it (safe mode, no examples): both DAGs found in those files, from the installed wheel."""
    repo = Path(__file__).resolve().parents[2]
    folder = tmp_path / "user_dags"
    folder.mkdir()
    expected = {}
    for name, doc in (("tablestore_replication", "airflow.md"), ("tablestore_spark_job", "spark.md"),
                      ("tablestore_stream_job", "spark.md")):
        line = f"from airflow_tablestore.example_dags.{name} import dag  # noqa: F401"
        assert line in (repo / "docs" / doc).read_text() and line in (repo / "dags" / f"{name}.py").read_text()
        (folder / f"enable_{name}.py").write_text(line + "\n")
        expected[name] = [str(folder / f"enable_{name}.py"), f"enable_{name}.py"]
    airflow_env = dict(env, AIRFLOW_HOME=str(tmp_path / "airflow_home_dags"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                       AIRFLOW__CORE__DAGS_FOLDER=str(folder))
    parsed = subprocess.run([str(bin_dir / "python"), "-c", PARSE_DAGS_FOLDER], capture_output=True, text=True,
                            env=airflow_env, cwd=tmp_path, timeout=300)
    assert parsed.returncode == 0, parsed.stdout[-3000:] + parsed.stderr[-3000:]
    report = json.loads(parsed.stdout.strip().splitlines()[-1])
    assert report["errors"] == {}, report["errors"]
    assert report["dags"] == expected, report["dags"]
    assert Path(report["module"]).is_relative_to(bin_dir.parent), report["module"]  # the wheel, not the checkout
    return sorted(report["dags"])


REPLICATE = textwrap.dedent('''
    import json, os, subprocess, sys, tempfile
    from pathlib import Path
    import pyarrow.parquet as pq
    from airflow_tablestore.client import TableClient, TunnelClient
    from airflow_tablestore.client.model import PrimaryKeyColumn, PrimaryKeyType, TableSchema, StreamSpec
    from airflow_tablestore.emulator.testing import EmulatorProcess
    from airflow_tablestore.spark.consumer.job import application_path

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
        job.write_text("from pyspark.sql import SparkSession\\n"
                       "spark = SparkSession.builder.getOrCreate()\\n"
                       "n = spark.read.format('tablestore').option('table', 'src').load().count()\\n"
                       "print(f'READ_ROWS {n}')\\n")
        read = subprocess.run(["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                               str(job)], env=env, capture_output=True, text=True, timeout=600)
    rows = sum(pq.read_table(f).num_rows for f in out.rglob("*.parquet"))
    read_rows = [line.split()[1] for line in read.stdout.splitlines() if line.startswith("READ_ROWS ")]
    print(json.dumps({"rc": run.returncode, "rows": rows, "output": run.stdout[-4000:] + run.stderr[-6000:],
                      "read_rc": read.returncode, "read_rows": read_rows,
                      "read_output": read.stdout[-2000:] + read.stderr[-4000:]}))
''')


def test_one_install_command_gives_a_consistent_spark_environment(dists: tuple[Path, Path], tmp_path: Path) -> None:
    """The built wheel with the documented extras, in an empty venv, and what its user runs."""
    _, wheel = dists
    bin_dir = build(USER_INSTALL, wheel)
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
    # the venv runs the wheel (not the checkout), at the package's version
    origin = subprocess.run(
        [str(bin_dir / "python"), "-c", "import importlib.metadata as m, json, airflow_tablestore; "
         f"d = m.distribution({PACKAGE!r}); print(json.dumps([d.version, airflow_tablestore.__file__, "
         "json.loads(d.read_text('direct_url.json'))['url']]))"],
        capture_output=True, text=True, check=True, cwd="/").stdout
    installed, module_file, url = json.loads(origin)
    assert installed == airflow_tablestore.__version__ and url.endswith(wheel.name), origin
    assert Path(module_file).is_relative_to(bin_dir.parent), origin

    # What a user's shell with the venv activated finds: the venv's bin first, then the system (and Java).
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        env["PATH"] += f":{os.environ['JAVA_HOME']}/bin"
    endpoint = _check_emulator_command(bin_dir, env, tmp_path)
    plugin = _check_pytest_plugin(bin_dir, env, tmp_path)
    _check_airflow_providers_get(bin_dir, env, tmp_path)
    _check_airflow_plugins(bin_dir, env, tmp_path)
    dag_ids = _check_dags_folder_lines(bin_dir, env, tmp_path)
    print(f"[compat] wheel {wheel.name}: tablestore-emulator served signed requests on {endpoint}; pytest plugin: "
          f"{plugin}; `airflow providers get {PACKAGE}` valid against Airflow's provider_info.schema.json; "
          "`airflow plugins` lists the Tablestore page; the "
          f"documented dags-folder lines parsed in safe mode: {', '.join(dag_ids)}")
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
