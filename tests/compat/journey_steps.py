"""The steps of docs/first-hour.md's journeys, read from the page (a helper module, not a test module).

Each code block a journey runs is preceded by a marker comment naming the journeys it belongs to and what to
do with it: ``<!-- journey: spark, operator -->`` runs a shell block; ``; file PATH`` saves the block as that
file of the project directory; ``; background [READY TEXT]`` starts a long-running command (a terminal of its
own), waiting for the text in its output; ``; output`` lists lines the previous command must print;
``; install`` is the install command (the tests install the built wheel instead, see test_first_hour.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "first-hour.md"
ACTIONS = ("run", "file", "background", "output", "install")
_MARKED = re.compile(r"<!-- journey: ([\w, -]+?)(?:; (\w+)(?: ([^>]*?))?)? -->\n```(\w+)\n(.*?)```", re.S)


@dataclass(frozen=True)
class Step:
    journeys: tuple[str, ...]
    action: str  # one of ACTIONS
    argument: str  # the file's path, the background command's ready text, or ""
    language: str
    text: str

    @property
    def title(self) -> str:
        """One line naming the step in the journey's log."""
        if self.action == "file":
            return f"save {self.argument}"
        first = self.text.strip().splitlines()[0]
        lines = len(self.text.strip().splitlines())
        return f"{self.action}: {first}" + (f" (+{lines - 1} lines)" if lines > 1 else "")


def all_steps(text: str | None = None) -> list[Step]:
    """Every marked block of the page, in order."""
    page = DOC.read_text() if text is None else text
    steps = []
    for names, action, argument, language, body in _MARKED.findall(page):
        step = Step(tuple(n.strip() for n in names.split(",")), action or "run", argument.strip(), language, body)
        assert step.action in ACTIONS, f"docs/first-hour.md: unknown journey action {step.action!r}"
        assert step.action != "file" or step.argument, "docs/first-hour.md: a file step names its path"
        assert step.language == "bash" or step.action in ("file", "output"), (
            f"docs/first-hour.md: a {step.action} step is a bash block, not {step.language}")
        steps.append(step)
    return steps


def journey(name: str) -> list[Step]:
    """The steps of one journey, in the page's order."""
    steps = [s for s in all_steps() if name in s.journeys]
    assert steps, f"docs/first-hour.md has no steps of journey {name!r}"
    return steps


def unmarked_blocks() -> list[str]:
    """Code blocks of the page that no marker claims (each must be run: none is allowed)."""
    page = DOC.read_text()
    marked = {m.start(4) for m in _MARKED.finditer(page)}
    return [m.group(0)[:80] for m in re.finditer(r"^```(\w+)\n", page, re.M) if m.start(1) not in marked]
