"""The dashboard's charts as inline SVG, rendered on the server: readable without JavaScript, no asset, nothing the
page's Content-Security-Policy has to let in (presentation attributes only, no inline style)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Final

from assembly.cli.vcctl import human_duration
from assembly.dashboard.timeline import QueueChart, WaitBar

WIDTH: Final = 420
HEIGHT: Final = 110
LEFT: Final = 34
BOTTOM: Final = 18
ALLOCATED: Final = "#4a7bd0"
DESERVED: Final = "#d04a4a"


def _runs(times: Sequence[float], values: Sequence[float | None], x: object, y: object) -> list[str]:
    """Polyline point lists of the runs of known values (a gap, where the queue was not sampled, breaks the line)."""
    runs: list[list[str]] = [[]]
    for t, v in zip(times, values, strict=True):
        if v is None:
            runs.append([])
            continue
        runs[-1].append(f"{x(t):.1f},{y(v):.1f}")  # type: ignore[operator]
    return [" ".join(r) for r in runs if r]


def _line(points: str, colour: str, dashed: bool) -> str:
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    if " " not in points:  # one sample: a dot
        cx, cy = points.split(",")
        return f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"/>'
    return f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>'


def queue_chart(chart: QueueChart, start: float, end: float) -> str:
    """GPUs allocated (solid) and deserved (dashed) of one queue from `start` to `end`."""
    top = max([v for v in (*chart.allocated, *chart.deserved) if v is not None] + [1.0]) * 1.1
    span = max(end - start, 1.0)

    def x(t: float) -> float:
        return LEFT + (min(max(t, start), end) - start) / span * (WIDTH - LEFT - 4)

    def y(v: float) -> float:
        return (HEIGHT - BOTTOM) - v / top * (HEIGHT - BOTTOM - 6)

    lines = [_line(p, ALLOCATED, False) for p in _runs(chart.times, chart.allocated, x, y)]
    lines += [_line(p, DESERVED, True) for p in _runs(chart.times, chart.deserved, x, y)]
    ticks = "".join(
        f'<text x="{x(end - h * 3600):.1f}" y="{HEIGHT - 4}" font-size="9" fill="#777" '
        f'text-anchor="{"end" if h == 0 else "middle"}">{"now" if h == 0 else f"-{h}h"}</text>'
        for h in (24, 18, 12, 6, 0))
    label = (f'<text x="{LEFT - 4}" y="12" font-size="9" text-anchor="end" fill="#777">{top / 1.1:g}</text>'
             f'<text x="{LEFT - 4}" y="{HEIGHT - BOTTOM}" font-size="9" text-anchor="end" fill="#777">0</text>')
    axes = (f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - 4}" y2="{HEIGHT - BOTTOM}" stroke="#ccc"/>'
            f'<line x1="{LEFT}" y1="6" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#ccc"/>')
    title = f"queue {chart.name}: GPUs allocated (solid) and deserved (dashed) over the last day"
    return (f'<svg class="chart" data-queue="{escape(chart.name)}" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
            f'{axes}{ticks}{label}{"".join(lines)}</svg>')


def _short(key: str, most: int = 36) -> str:
    """A label that fits the chart's label column (the whole key is in the bar's title)."""
    return key if len(key) <= most else "…" + key[-(most - 1):]


def wait_chart(bars: Sequence[WaitBar]) -> str:
    """One bar per job: how long it waited before it started (blue) or has been waiting so far (amber)."""
    row, label_w, bar_w = 18, 230, 260
    longest = max([b.waited_s for b in bars] + [1.0])
    rows = []
    for i, bar in enumerate(bars):
        y = i * row
        width = max(bar.waited_s / longest * bar_w, 1.0)
        colour = "#e0a030" if bar.waiting else ALLOCATED
        state = "waiting for" if bar.waiting else "waited"
        rows.append(
            f'<g><title>{escape(bar.key)} (queue {escape(bar.queue)}) {state} {human_duration(bar.waited_s)}</title>'
            f'<text x="{label_w - 6}" y="{y + 13}" font-size="11" text-anchor="end">{escape(_short(bar.key))}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width:.1f}" height="{row - 6}" fill="{colour}"/>'
            f'<text x="{label_w + width + 4:.1f}" y="{y + 13}" font-size="11" fill="#555">'
            f'{human_duration(bar.waited_s)}{" so far" if bar.waiting else ""}</text></g>')
    height = max(len(bars), 1) * row
    total = label_w + bar_w + 90
    return (f'<svg class="waits" width="{total}" height="{height}" viewBox="0 0 {total} {height}" role="img" '
            f'aria-label="waiting time per job">{"".join(rows)}</svg>')


__all__ = ["queue_chart", "wait_chart"]
