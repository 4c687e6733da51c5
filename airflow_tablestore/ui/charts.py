"""Inline SVG bar charts of a DAG's recent runs (no JavaScript): one bar per run, coloured by the run's state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from airflow_tablestore.ui.metadata import RunPoint

WIDTH, HEIGHT = 300, 120
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 22
STATE_COLOURS = {"success": "#16a34a", "failed": "#dc2626"}
OTHER_COLOUR = "#64748b"


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (a readable axis top)."""
    if value <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    while step > value:
        step /= 10
    for factor in (1, 2, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def bar_chart(title: str, runs: Sequence[RunPoint], value: Callable[[RunPoint], float | None],
              label: Callable[[float], str]) -> str:
    """An SVG chart of ``value`` per run; a run without a value leaves a gap (its tooltip says so)."""
    values = [value(run) for run in runs]
    known = [v for v in values if v is not None]
    top = _nice_max(max(known, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(runs), 1)
    bar_w = max(2.0, min(24.0, slot * 0.7))
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg" data-chart="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" class="axis"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" class="axis"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end" class="tick">{escape(label(top))}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end" class="tick">0</text>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h / 2}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h / 2}" class="grid"/>',
    ]
    for i, (run, v) in enumerate(zip(runs, values, strict=True)):
        x = LEFT + i * slot + (slot - bar_w) / 2
        tip = f"{run.run_id} ({run.state}): {label(v) if v is not None else 'not recorded'}"
        if v is None:
            parts.append(f'<rect class="gap" x="{x:.1f}" y="{TOP + plot_h - 2}" width="{bar_w:.1f}" height="2">'
                         f'<title>{escape(tip)}</title></rect>')
            continue
        h = max(1.0, plot_h * v / top)
        colour = STATE_COLOURS.get(run.state, OTHER_COLOUR)
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w:.1f}" '
                     f'height="{h:.1f}" fill="{colour}" rx="1.5"><title>{escape(tip)}</title></rect>')
    if runs:
        parts.append(f'<text x="{LEFT}" y="{HEIGHT - 6}" class="tick">oldest</text>')
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 6}" text-anchor="end" class="tick">latest</text>')
    else:
        parts.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" text-anchor="middle" class="tick">'
                     'no finished runs</text>')
    parts.append("</svg>")
    return "".join(parts)
