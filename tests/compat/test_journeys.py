"""docs/first-hour.md's journeys, run as the page writes them, from the built wheel (part of ``make test-compat``;
``make test-journeys`` runs them alone).

The session's ``python -m build`` makes the sdist and the wheel (conftest.py); the wheel is installed with the
extras the page's install command names into the venv of the matrix's "one install command" cell
(test_matrix.py's ``USER_INSTALL``: the same venv, built once per session). Each journey then runs in an empty
project directory whose ``venv`` is that venv, each block as a process of its own, in the page's order: shell
blocks with ``bash``, files saved where the page says, long-running commands in the background (a terminal of
their own) until their ready line. The environment is what a user's fresh shell has: ``PATH`` with the system's
``python3`` first (not the venv's; Java on it), a fresh ``HOME``, and nothing else but what the page's own
``export`` lines and ``source venv/bin/activate`` add (carried from block to block as a shell would). Two
substitutions, nothing more: the install command (checked, then replaced by the prepared venv) and the ports 8800
and 8080 (free ports, so parallel runs cannot collide).

Each step's title, time and result are printed (``[journey NAME]`` lines) and the page's ``output`` blocks are
checked against what the step before them printed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .envs import build
from .journey_steps import Step, all_steps, journey, unmarked_blocks
from .test_matrix import USER_INSTALL

pytestmark = pytest.mark.timeout(3600)

INSTALL = ["python3 -m venv venv", f'venv/bin/pip install "airflow-provider-tablestore[{USER_INSTALL.extras}]"']
PORTS = ("8800", "8080")  # the emulator's and the api-server's, as the page writes them
STEP_TIMEOUT = 1200.0
READY_TIMEOUT = 300.0
_SHELL_VARIABLES = ("_", "SHLVL", "OLDPWD", "PWD")  # bash's own, not the user's environment


@functools.cache
def _bash_variables() -> tuple[str, ...]:
    """The variables bash itself defines (what a new terminal has before the user sets any)."""
    names = subprocess.run(["bash", "--norc", "--noprofile", "-c", "compgen -v"], env={}, capture_output=True,
                           text=True, check=True).stdout.split()
    return tuple(sorted({*names, *_SHELL_VARIABLES, "BASH_REMATCH", "PIPESTATUS", "COLUMNS", "LINES"}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user_path() -> str:
    """A user's shell without the venv: the system's directories (``python3`` there is not the venv's), and Java
    (where ``JAVA_HOME`` says, when the machine sets it)."""
    path = "/usr/local/bin:/usr/bin:/bin"
    if os.environ.get("JAVA_HOME"):
        path += f":{os.environ['JAVA_HOME']}/bin"
    return path


@dataclass
class Journey:
    """One journey's project directory, shell state and background processes."""

    name: str
    root: Path
    venv: Path
    ports: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = field(init=False)
    background: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)
    last_output: str = ""
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cwd = self.root / "project"
        self.cwd.mkdir(parents=True)
        home = self.root / "home"
        home.mkdir()
        self.env = {"PATH": user_path(), "HOME": str(home)}

    def text(self, step: Step) -> str:
        text = step.text
        for documented, port in self.ports.items():
            text = re.sub(rf"\b{documented}\b", port, text)
        return text

    def run(self, steps: list[Step]) -> None:
        started = time.monotonic()
        try:
            for number, step in enumerate(steps, 1):
                begun = time.monotonic()
                try:
                    getattr(self, f"_{step.action}")(step)
                except BaseException:
                    self._note(f"step {number} ({step.title}) FAILED after {time.monotonic() - begun:.1f}s")
                    raise
                self._note(f"step {number} ({step.title}) ok in {time.monotonic() - begun:.1f}s")
        finally:
            self.stop()
            self._note(f"{len(self.log)} steps logged, {time.monotonic() - started:.0f}s in all")

    def _note(self, line: str) -> None:
        self.log.append(line)
        print(f"[journey {self.name}] {line}", flush=True)

    def _install(self, step: Step) -> None:
        commands = [line.strip() for line in step.text.strip().splitlines()]
        assert commands == INSTALL, f"the page's install command changed: {commands} (update USER_INSTALL)"
        (self.cwd / "venv").symlink_to(self.venv, target_is_directory=True)

    def _file(self, step: Step) -> None:
        path = self.cwd / step.argument
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text(step))

    def _run(self, step: Step) -> None:
        state = self.root / "shell-state"
        script = self.root / "step.sh"
        # bash -e as a careful user types it: the first failing command stops the step. As in one terminal, the
        # environment, the shell variables the blocks set (TOKEN=...) and the directory carry over to the next block
        variables = Path(f"{state}.vars")
        script.write_text(
            (f"source {variables}\n" if variables.exists() else "")
            + f"set -eo pipefail\n{self.text(step)}\nenv -0 > {state}.env\npwd > {state}.cwd\n"
            + f"for v in $(compgen -v); do case ' {' '.join(_bash_variables())} v ' in *\" $v \"*) ;; "
            + f"*) declare -p \"$v\";; esac; done > {variables}\n")
        done = subprocess.run(["bash", str(script)], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=STEP_TIMEOUT)
        self.last_output = done.stdout
        (self.root / "outputs.log").open("a").write(f"$ {step.text}\n{done.stdout}\n")
        assert done.returncode == 0, f"exit code {done.returncode}:\n{done.stdout[-8000:]}"
        entries = (Path(f"{state}.env").read_bytes().decode().split("\0"))
        self.env = dict(e.split("=", 1) for e in entries if "=" in e and e.split("=", 1)[0] not in _SHELL_VARIABLES)
        self.cwd = Path(Path(f"{state}.cwd").read_text().strip())

    def _output(self, step: Step) -> None:
        printed = [line.strip() for line in self.last_output.splitlines()]
        for expected in filter(None, (line.strip() for line in step.text.splitlines())):
            assert any(re.match(rf"{re.escape(expected)}(?!\w)", line) for line in printed), (
                f"the page says the command prints {expected!r}; it printed:\n{self.last_output[-6000:]}")

    def _background(self, step: Step) -> None:
        log_path = self.root / f"background-{len(self.background)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(["bash", "-c", self.text(step)], cwd=self.cwd, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append((proc, log_path))
        if not step.argument:
            return
        deadline = time.monotonic() + READY_TIMEOUT
        while step.argument not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, f"exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no {step.argument!r} in:\n{log_path.read_text()[-4000:]}"
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM the background commands' process groups (Ctrl-C in their terminals), then SIGKILL."""
        for proc, _ in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.background:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        for proc, _ in self.background:  # children a component left behind (task runners, Spark)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.background.clear()

    def logs(self) -> str:
        tails = [f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                 for path in sorted(self.root.glob("background-*.log"))]
        return "\n".join(tails)


@pytest.fixture(scope="module")
def wheel_venv(dists: tuple[Path, Path]) -> Path:
    """The built wheel installed with the page's extras: the venv's root."""
    started = time.monotonic()
    bin_dir = build(USER_INSTALL, dists[1])
    print(f"[journey] the wheel's venv in {time.monotonic() - started:.0f}s", flush=True)
    return bin_dir.parent


@pytest.fixture
def run_journey(wheel_venv: Path, tmp_path: Path) -> Iterator[Callable[[str], Journey]]:
    ran: list[Journey] = []

    def run(name: str) -> Journey:
        ports = {documented: str(_free_port()) for documented in PORTS}
        trip = Journey(name, tmp_path / name, wheel_venv, ports)
        ran.append(trip)
        try:
            trip.run(journey(name))
        except BaseException as exc:
            raise AssertionError(f"journey {name}: {exc}\n{trip.logs()}") from exc
        return trip

    yield run
    for trip in ran:
        trip.stop()
        shutil.rmtree(trip.root / "project" / "emulator-data", ignore_errors=True)


def test_every_block_of_the_page_is_a_step() -> None:
    assert unmarked_blocks() == []
    assert {name for step in all_steps() for name in step.journeys} == {"spark", "dag-author", "operator"}


def test_spark_user(run_journey: Callable[[str], Journey]) -> None:
    """Emulator, client, spark.read -> filter/aggregate -> df.write -> read back (python and spark-submit), a
    tunnel, readStream availableNow twice with changes between: each output as the page shows it. Then
    docs/spark.md's account of PYSPARK_PYTHON: without it the same job fails with [DATA_SOURCE_NOT_FOUND] (the
    system's python3 runs Spark's Python workers) and spark-submit finds no Spark; with the venv activated
    instead, it works."""
    trip = run_journey("spark")
    without = {k: v for k, v in trip.env.items() if k != "PYSPARK_PYTHON"}
    emulator = subprocess.Popen(["venv/bin/tablestore-emulator", "--port", trip.ports["8800"], "--data-dir",
                                 "./emulator-data"], cwd=trip.cwd, env=without, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        assert emulator.stdout is not None
        for line in emulator.stdout:
            if "listening on" in line:
                break
        plain = subprocess.run(["venv/bin/python", "shop_totals.py"], cwd=trip.cwd, env=without,
                               capture_output=True, text=True, timeout=STEP_TIMEOUT)
        submit = subprocess.run(["venv/bin/spark-submit", "shop_totals.py"], cwd=trip.cwd, env=without,
                                capture_output=True, text=True, timeout=STEP_TIMEOUT)
        activated = subprocess.run(["bash", "-c", "source venv/bin/activate && python shop_totals.py"],
                                   cwd=trip.cwd, env=without, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    finally:
        emulator.terminate()
        emulator.wait(60)
    assert plain.returncode != 0 and "DATA_SOURCE_NOT_FOUND" in plain.stdout + plain.stderr, plain.stderr[-3000:]
    assert submit.returncode != 0 and "Could not find valid SPARK_HOME" in submit.stderr, submit.stderr[-3000:]
    assert activated.returncode == 0, activated.stderr[-3000:]
    # the totals of the orders as the journey left them (change_orders.py refunded 8 paid orders, deleted 4)
    assert activated.stdout.splitlines()[-3:] == ["s0: total=1140.0 orders=21", "s1: total=1046.0 orders=20",
                                                  "s2: total=1148.0 orders=22"], activated.stdout
    print("[journey spark] without PYSPARK_PYTHON: [DATA_SOURCE_NOT_FOUND] (python), no SPARK_HOME (spark-submit); "
          "with the venv activated: the totals", flush=True)


def test_dag_author(run_journey: Callable[[str], Journey]) -> None:
    """An own DAG in dags/ and its pytest test (the package's plugin, pythonpath = dags): 1 passed."""
    run_journey("dag-author")


def test_operator(run_journey: Callable[[str], Journey]) -> None:
    """The replication DAG and the streaming job DAG under api-server, scheduler, dag-processor and triggerer:
    unpause, CLI trigger, REST trigger with a JWT from /auth/token, the verifier after each; the streaming DAG's
    scheduled run."""
    run_journey("operator")
