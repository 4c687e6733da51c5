"""Import each named module of the package alone, as the first package import of a process; print JSON failures.

Run by ``tests/test_imports.py`` as ``python tests/import_alone.py PACKAGE_DIR MODULE...``. A fresh interpreter
per module spent most of its time importing Airflow and PySpark again; here the third-party modules the package
imports are loaded once, then each package module is imported in a forked child, with warnings as errors, as the
first import of a new interpreter would. Importing Airflow loads its providers' ``get_provider_info`` (this
package's too), so the package modules a preload brings in must import no other package module (then no cycle can
pass through them); those few are imported in a fresh interpreter instead.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

from import_graph import imports_of

PARALLEL = max(2, os.cpu_count() or 2)


def module_file(root: Path, module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package_init = root / relative / "__init__.py"
    return package_init if package_init.exists() else root / relative.with_suffix(".py")


def third_party_imports(root: Path) -> list[str]:
    """Every module the files of the package at ``root`` import that is not the package (stdlib included)."""
    names = set().union(*(imports_of(path, root) for path in root.rglob("*.py")))
    return sorted(n for n in names if n.split(".")[0] not in (root.name, "__future__"))


def preload(names: list[str], root: Path) -> set[str]:
    """Import what imports cleanly (warnings as errors, as in the children); the rest each child imports.
    Returns the package modules this loaded, after checking they import no package module beyond themselves."""
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - optional or failing: left to the children, which report it
            pass
    package = root.name
    loaded = {m for m in sys.modules if m == package or m.startswith(package + ".")}
    for module in sorted(loaded):
        beyond = {n for n in imports_of(module_file(root, module), root) if n.split(".")[0] == package} - loaded
        if beyond:
            raise SystemExit(f"preloading third-party modules imported {module}, which imports {sorted(beyond)}: "
                             "a cycle through it would be hidden")
    return loaded


def import_in_fresh_interpreter(module: str, root: Path) -> str | None:
    code = f"import warnings; warnings.simplefilter('error'); import {module}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                filter(None, [str(root.parent), os.environ.get("PYTHONPATH")]))})
    return None if result.returncode == 0 else result.stderr[-1500:]


def import_in_child(module: str, report: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        warnings.simplefilter("error")
        importlib.import_module(module)
    except BaseException:  # noqa: BLE001
        report.write_text(traceback.format_exc()[-1500:])
        code = 1
    finally:
        os._exit(code)


def main(root: Path, modules: list[str]) -> None:
    sys.path.insert(0, str(root.parent))
    preloaded = preload(third_party_imports(root), root)
    failures = {m: error for m in modules if m in preloaded
                if (error := import_in_fresh_interpreter(m, root)) is not None}
    running: dict[int, tuple[str, Path]] = {}
    pending = [m for m in modules if m not in preloaded]
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"import-alone-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    while pending or running:
        while pending and len(running) < PARALLEL:
            module = pending.pop()
            report = scratch / module
            running[import_in_child(module, report)] = (module, report)
        pid, status = os.wait()
        module, report = running.pop(pid)
        if status != 0:
            failures[module] = report.read_text() if report.exists() else f"exit status {status}"
        report.unlink(missing_ok=True)
    scratch.rmdir()
    print(json.dumps(failures))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2:])
