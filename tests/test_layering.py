"""Architecture rules, checked twice: by importing each layer with its forbidden dependencies blocked, and by
reading every import statement of every module with ``ast`` (imports inside functions included, which an import
run does not reach).

* client/ and emulator/ never import airflow or pyspark; the emulator never imports the client.
* spark/ and the example DAGs' PySpark jobs never import airflow.
* The Airflow layer never imports spark/, except the driver-side submit path: ``operators/spark_submit.py``
  builds the consumer's ``spark-submit`` call from :data:`SUBMIT_PATH` (where the application file and its log
  configuration are, the consumer's own argument parser to check the arguments before submitting, its exit
  codes, and the spark-submit/Java preflight), all importable without pyspark.
* No import cycle between spark/'s subpackages (consumer, datasource, stream, sinks and the shared modules), nor
  between any two of its modules.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import imports_of, module_name

_CLIENT_IMPORT = re.compile(r"^\s*(from|import)\s+airflow_tablestore\.client\b", re.MULTILINE)
PACKAGE = Path(__file__).resolve().parent.parent / "airflow_tablestore"

_BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def __init__(self, names): self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in self.names:
            raise ImportError(f'layering violation: {{name}} imported')
sys.meta_path.insert(0, Block({blocked!r}))
import importlib, pkgutil
for module in {modules!r}:
    importlib.import_module(module)
print('ok')
"""


def _modules(subpackage: str) -> list[str]:
    root = PACKAGE / subpackage
    names = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@pytest.mark.parametrize(
    ("subpackage", "blocked"),
    [("client", {"airflow", "pyspark"}), ("emulator", {"airflow", "pyspark"}), ("spark", {"airflow"}),
     ("example_dags/jobs", {"airflow"}),  # the example DAGs' PySpark jobs run on Spark, without Airflow
     ("ui", {"pyspark"})],  # the UI page runs in the api-server: Airflow, the hooks and the client, never Spark
)
def test_subpackage_imports_without_forbidden_dependencies(subpackage: str, blocked: set[str]) -> None:
    # each row needs what it may import: spark/ and the jobs need PySpark, the page needs Airflow
    if subpackage in ("spark", "example_dags/jobs"):
        pytest.importorskip("pyspark", reason="the spark extra is not installed (client/emulator-only venv)")
    if subpackage == "ui":
        # airflow.sdk, not airflow: tests/ is on sys.path, and its airflow/ folder is a namespace package "airflow"
        pytest.importorskip("airflow.sdk", reason="the airflow extra is not installed (client/emulator-only venv)")
    modules = _modules(subpackage)
    code = _BLOCKER.format(blocked=sorted(blocked), modules=modules)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_emulator_does_not_import_client() -> None:
    """The emulator and the client share only the wire format (protocol/), so each tests the other."""
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in (PACKAGE / "emulator").rglob("*.py")
        if _CLIENT_IMPORT.search(path.read_text())
    ]
    assert offenders == []


# -- every import statement, read with ast ------------------------------------------------------------------
AIRFLOW_LAYER = ("hooks", "operators", "sensors", "triggers", "assets", "links", "ui", "example_dags")
SUBMIT_PATH = {
    "airflow_tablestore/operators/spark_submit.py": {
        "airflow_tablestore.spark.consumer.job",
        "airflow_tablestore.spark.consumer.options",
        "airflow_tablestore.spark.consumer.preflight",
    },
}
"""The spark/ modules the Airflow layer may import, by importer: the driver-side submit path."""


def _files(*subpackages: str) -> list[Path]:
    return sorted(p for sub in subpackages for p in (PACKAGE / sub).rglob("*.py"))


def _top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize(
    ("subpackages", "blocked"),
    [(("client", "emulator"), {"airflow", "pyspark"}), (("spark", "example_dags/jobs"), {"airflow"})],
)
def test_no_forbidden_import_anywhere_in_the_code(subpackages: tuple[str, ...], blocked: set[str]) -> None:
    offenders = sorted(f"{path.relative_to(PACKAGE.parent)}: {name}" for path in _files(*subpackages)
                       for name in imports_of(path, PACKAGE) if _top(name) in blocked)
    assert offenders == []


def test_the_emulator_imports_nothing_of_the_client_anywhere() -> None:
    offenders = sorted(f"{path.relative_to(PACKAGE.parent)}: {name}" for path in _files("emulator")
                       for name in imports_of(path, PACKAGE) if name.startswith("airflow_tablestore.client"))
    assert offenders == []


def test_the_airflow_layer_imports_spark_only_on_the_submit_path() -> None:
    offenders = []
    for path in _files(*AIRFLOW_LAYER):
        if "jobs" in path.relative_to(PACKAGE).parts:  # the example DAGs' PySpark jobs run on Spark
            continue
        rel = path.relative_to(PACKAGE.parent).as_posix()
        allowed = SUBMIT_PATH.get(rel, set())
        offenders += [f"{rel}: {name}" for name in sorted(imports_of(path, PACKAGE))
                      if name.startswith("airflow_tablestore.spark") and name not in allowed]
    assert offenders == []


def test_the_submit_path_imports_without_pyspark() -> None:
    """What the Airflow layer imports of spark/ is imported in an Airflow worker, where PySpark may be absent."""
    modules = sorted(set().union(*SUBMIT_PATH.values()))
    code = _BLOCKER.format(blocked=["pyspark"], modules=modules)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a path whose last node is its first), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _spark_graph(unit: int | None) -> dict[str, set[str]]:
    """Imports between spark/'s modules; ``unit`` 3 folds them into subpackages (``airflow_tablestore.spark.x``)."""
    graph: dict[str, set[str]] = {}
    for path in _files("spark"):
        source = ".".join(module_name(path, PACKAGE).split(".")[:unit])
        targets = {".".join(name.split(".")[:unit]) for name in imports_of(path, PACKAGE)
                   if name.startswith("airflow_tablestore.spark.")}
        graph.setdefault(source, set()).update(targets - {source})
    return graph


def test_the_cycle_check_sees_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_spark_subpackages() -> None:
    graph = _spark_graph(3)
    assert _cycle(graph) is None
    spark = "airflow_tablestore.spark."
    # the products stand apart: the data sources never reach into the consumer or its sinks
    for product in ("datasource", "stream"):
        assert not graph[spark + product] & {spark + "consumer", spark + "sinks"}, graph[spark + product]
    assert spark + "stream" not in graph[spark + "datasource"]


def test_no_import_cycle_between_spark_modules() -> None:
    graph = _spark_graph(None)
    for source in graph:  # a package's __init__ is not an edge of its modules' cycles
        graph[source] = {t for t in graph[source] if not source.startswith(t + ".")}
    assert _cycle(graph) is None


def test_imports_inside_functions_are_seen(tmp_path: Path) -> None:
    """The ast reader finds an import made inside a function (which the import-time check never runs)."""
    probe = PACKAGE / "spark" / "format.py"
    assert "airflow_tablestore.spark.stream.reader" in imports_of(probe, PACKAGE)  # imported inside streamReader()
