"""Build the virtual environments of the compatibility matrix (``make test-compat``).

Each environment is a fresh venv under ``.venvs/`` named after what it holds, rebuilt when its specification
changes (a stamp file keeps the spec): an environment is a claim in README.md (a Python, protobuf or Airflow
version, or one install command), and a test runs the suite that proves the claim inside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / ".venvs"
TEST_TOOLS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "jsonschema>=4.20", "pyyaml>=6")


@dataclass(frozen=True)
class EnvSpec:
    """A venv: which Python, what to pip install (one resolver run), and whether the checkout is editable."""

    name: str
    python: str  # "3.11", "3.12", ...
    requirements: tuple[str, ...]
    editable: bool = True
    extras: str = ""
    test_tools: bool = True

    def stamp(self, interpreter: str, dist: Path | None = None) -> str:
        """What the venv was built from: spec, interpreter, pyproject.toml, and for a non-editable install the
        package sources too (a copy of them is what the venv runs), or the content of the built ``dist``."""
        version = subprocess.run([interpreter, "-c", "import sys; print(sys.version)"], capture_output=True,
                                 text=True, check=True).stdout
        spec = [self.python, version, self.requirements, self.editable, self.extras, self.test_tools,
                (REPO / "pyproject.toml").read_text()]
        if dist is not None:
            spec.append(dist_digest(dist))
        elif not self.editable:
            sources = hashlib.sha256()
            for path in sorted([*(REPO / "airflow_tablestore").rglob("*"), REPO / "pyspark_tablestore.py"]):
                if path.is_file() and "__pycache__" not in path.parts:
                    sources.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
            spec.append(sources.hexdigest())
        return hashlib.sha256(json.dumps(spec).encode()).hexdigest()


def find_python(version: str) -> str:
    """The interpreter for ``version`` (pyenv's versions, then PATH); fails with one line saying how to get it.

    Each candidate is run to confirm its version: pyenv's shims are on PATH even for versions not selected."""
    candidates = [sys.executable] if sys.version_info[:2] == tuple(int(x) for x in version.split(".")) else []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv_root.is_dir():
        def release(path: Path) -> tuple[int, ...]:
            return tuple(int(x) if x.isdigit() else -1 for x in path.name.split("."))

        installed = sorted(pyenv_root.glob(f"{version}.*"), key=release, reverse=True)
        candidates += [str(p / "bin" / f"python{version}") for p in installed]
    candidates += [c for c in [shutil.which(f"python{version}")] if c]
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    raise RuntimeError(f"Python {version} not found (pyenv or PATH): install it, e.g. `pyenv install {version}`")


def build(spec: EnvSpec, dist: Path | None = None) -> Path:
    """The venv's ``bin`` directory, built (or reused when the stamp matches).

    With ``dist`` (a built wheel or sdist, see ``build_dists``) the venv installs that file with the spec's
    extras instead of the checkout: what a user installing the release gets."""
    root = VENVS / spec.name
    stamp_file = root / ".stamp"
    interpreter = find_python(spec.python)
    stamp = spec.stamp(interpreter, dist)
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return root / "bin"
    shutil.rmtree(root, ignore_errors=True)
    if not spec.editable and dist is None:  # a stale setuptools build/ tree would leak deleted modules into the wheel
        shutil.rmtree(REPO / "build", ignore_errors=True)
    started = time.monotonic()
    subprocess.run([interpreter, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    upgrade = subprocess.run([*pip, "-U", "pip"], capture_output=True, text=True)
    if upgrade.returncode != 0:
        raise RuntimeError(f"pip self-upgrade in {spec.name} failed:\n{upgrade.stderr[-4000:]}")
    source = dist if dist is not None else REPO
    target = f"{source}[{spec.extras}]" if spec.extras else str(source)
    editable = spec.editable and dist is None
    args = [*pip, *(["-e", target] if editable else [target]), *spec.requirements]
    if spec.test_tools:
        args += list(TEST_TOOLS)
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip install for {spec.name} failed:\n{result.stderr[-4000:]}")
    print(f"[compat] built {spec.name} in {time.monotonic() - started:.0f}s", flush=True)
    stamp_file.write_text(stamp)
    return root / "bin"


def run_pytest(bin_dir: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run this checkout's tests with the venv's interpreter (its own AIRFLOW_HOME, no inherited venv)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def pip_versions(bin_dir: Path, *names: str) -> dict[str, str]:
    """Installed versions of ``names`` in the venv ("-" when absent)."""
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(n):\n    try: return m.version(n)\n    except m.PackageNotFoundError: return '-'\n"
            "print(json.dumps({n: v(n) for n in sys.argv[1:]}))")
    out = subprocess.run([str(bin_dir / "python"), "-c", code, *names], capture_output=True, text=True, check=True)
    versions: dict[str, str] = json.loads(out.stdout)
    return versions


def dist_digest(path: Path) -> str:
    """The content of a wheel or sdist (member names and bytes, not the archive's timestamps)."""
    digest = hashlib.sha256()
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as archive:
            for name in sorted(archive.namelist()):
                digest.update(name.encode() + b"\0" + archive.read(name))
    else:
        with tarfile.open(path) as archive:
            members = sorted((m for m in archive.getmembers() if m.isfile()), key=lambda m: m.name)
            for member in members:
                handle = archive.extractfile(member)
                assert handle is not None
                digest.update(member.name.encode() + b"\0" + handle.read())
    return digest.hexdigest()


def source_tree(dest: Path) -> Path:
    """A copy of the checkout as a clean clone with the working tree's changes would have it: the files git
    tracks or would track (no venvs, no ``*.egg-info``/``build/`` left by earlier builds, whose stale
    SOURCES.txt setuptools would otherwise reuse)."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout.decode()
    for name in filter(None, listing.split("\0")):
        path = REPO / name
        if path.is_file():  # a tracked file deleted in the working tree is not part of it
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / name)
    return dest


def build_dists(out_dir: Path) -> tuple[Path, Path]:
    """``python -m build`` of a clean copy of the checkout: ``(sdist, wheel)`` in ``out_dir``.

    ``build`` makes the sdist, then the wheel from the unpacked sdist, so the wheel also proves the sdist
    is complete."""
    src = source_tree(out_dir / "src")
    dist_dir = out_dir / "dist"
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist_dir), str(src)],
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"python -m build failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")
    (sdist,) = dist_dir.glob("*.tar.gz")
    (wheel,) = dist_dir.glob("*.whl")
    return sdist, wheel
