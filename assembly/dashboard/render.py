"""The dashboard's HTML: readable without JavaScript (server-rendered tables, bars and charts as inline SVG); a
20-line script re-fetches the `#live` fragment every few seconds. No build step, no external asset, no inline style
attribute (a bar's length is an SVG attribute), so the Content-Security-Policy lets in only the page's own style and
script blocks."""

from __future__ import annotations

import base64
import hashlib
from html import escape
from typing import Final

from assembly.dashboard.charts import queue_chart, wait_chart
from assembly.dashboard.page import Bar, CardCell, JobRow, Page, QueueRow, fraction
from assembly.dashboard.timeline import Timeline
from assembly.dashboard.topology import Topology
from lapilli.resources.units import MEMORY

REFRESH_MS: Final = 2000

_STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%;margin-bottom:.6em}
th,td{text-align:left;padding:.25em .5em;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f6f6;font-weight:600}
.q{font-weight:600}.muted{color:#777}.small{font-size:.85em}
svg.bar{height:.9em;width:14em;vertical-align:middle}svg.bar.card{width:6em;height:.7em}
svg.bar .bg{fill:#eee}svg.bar .a{fill:#4a7bd0}svg.bar .d{fill:#d04a4a}
.kind{display:inline-block;padding:0 .4em;border-radius:3px;background:#eee;font-size:.85em}
.chart-box{display:inline-block;margin:0 1em .6em 0;vertical-align:top}
.partial{background:#fff3cd;border:1px solid #e0c36c;padding:.4em .6em}
.Running,.Starting{background:#d7f0d7}.Unresolvable,.QueueClosed,.QueueMissing{background:#f6d0d0}
"""

_SCRIPT_BODY: Final = """
(function(){
  var live=document.getElementById('live');
  function refresh(){
    fetch('fragment',{cache:'no-store'}).then(function(r){return r.ok?r.text():null;})
      .then(function(t){if(t!==null){live.innerHTML=t;}}).catch(function(){});
  }
  setInterval(refresh,REFRESH);
})();
""".replace("REFRESH", str(REFRESH_MS))
_SCRIPT: Final = f"<script>{_SCRIPT_BODY}</script>"


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The page's one script and one style block, by their hashes; nothing else runs, loads or styles (no external asset,
# no frame, no form, no inline style attribute: a hash never admits one).
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; script-src {_digest(_SCRIPT_BODY)}; style-src {_digest(_STYLE)}; style-src-attr 'none'; "
    "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                           "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}


def _amount(resource: str, value: float | None, missing: str = "∞") -> str:
    if value is None:
        return missing
    if resource == MEMORY:
        return f"{value / 2**30:.1f}Gi"
    return f"{value:g}"


def _svg_bar(filled: float, marker: float | None = None, kind: str = "bar") -> str:
    """A bar `filled` (0..1) long, with a mark at `marker` (0..1): its lengths are SVG attributes, not styles."""
    mark = f'<rect class="d" x="{min(max(marker * 100 - 0.5, 0.0), 99.0):.1f}" width="1" height="10"/>' \
        if marker is not None else ""
    return (f'<svg class="{kind}" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
            f'<rect class="bg" width="100" height="10"/><rect class="a" width="{filled * 100:.1f}" height="10"/>'
            f'{mark}</svg>')


def _bar(bar: Bar) -> str:
    scale = bar.capability if bar.capability is not None else max(bar.deserved or 0.0, bar.allocated) or 1.0
    deserved = fraction(bar.deserved, scale) if bar.deserved is not None else None
    title = (f"allocated {_amount(bar.resource, bar.allocated)}, deserved {_amount(bar.resource, bar.deserved, '-')}, "
             f"capability {_amount(bar.resource, bar.capability)}")
    return (f'<div class="small">{escape(bar.resource)} <span title="{escape(title)}">'
            f'{_svg_bar(fraction(bar.allocated, scale), deserved)}</span> '
            f'{_amount(bar.resource, bar.allocated)} / deserved {_amount(bar.resource, bar.deserved, "-")}'
            f' / cap {_amount(bar.resource, bar.capability)}</div>')


def _usage(usage: str) -> str:
    """The queue's decayed usage under its share (fairshare; nothing without a record)."""
    if usage == "-":
        return ""
    return f'<div class="small muted" title="decayed usage, as last sampled">used {escape(usage)}</div>'


def _queue(row: QueueRow) -> str:
    indent = "&nbsp;" * 4 * row.depth + ("└ " if row.depth else "")
    bars = "".join(_bar(b) for b in row.bars) or '<span class="muted small">nothing allocated</span>'
    head = (f'<tr><td class="q">{indent}{escape(row.name)}</td><td>{escape(row.state)}</td><td>{row.weight}</td>'
            f'<td>{row.share:.2f}{_usage(row.usage)}</td><td>{bars}</td></tr>')
    return head + "".join(_job(j, row.depth + 1) for j in row.jobs)


def _job(j: JobRow, depth: int) -> str:
    scheduler = f'<div class="small muted">{escape(j.scheduler)}</div>' if j.scheduler else ""
    if j.estimate:
        scheduler = f'<div class="small">{escape(j.estimate)}</div>' + scheduler
    return (f'<tr><td>{"&nbsp;" * 4 * depth}{escape(j.job or j.key)}</td><td>{escape(j.phase)}</td>'
            f'<td>{escape(j.age)}</td><td><span class="kind {escape(j.kind)}">{escape(j.kind)}</span></td>'
            f'<td class="why">{escape(j.why)}{scheduler}</td></tr>')


def _missing(jobs: list[JobRow]) -> str:
    """PodGroups whose queue is not there: they would otherwise be on no queue's row."""
    if not jobs:
        return ""
    head = ('<tr><td class="q">missing queue</td><td colspan="4" class="muted small">PodGroups whose queue does not '
            'exist (or cannot be read)</td></tr>')
    return head + "".join(_job(j, 1) for j in jobs)


def _partial(page: Page) -> str:
    if not page.unreadable:
        return ""
    return ('<p class="partial" id="partial"><b>Partial view:</b> your credentials could not read '
            f'{escape("; ".join(page.unreadable))}. Reasons computed without them may be wrong; the scheduler\'s own '
            'answer (condition lapilli.io/Why) is shown under each job.</p>')


def _estimated(at: str) -> str:
    """When the expected starts were made, while a newer replay is due (the cluster changed since)."""
    return f" · expected starts as of {escape(at)}" if at else ""


def _cards(cards: list[CardCell]) -> str:
    """A node's shared GPUs: a short bar per card of its memory in use (`20/80 GB · 1 pod`)."""
    return "<br>".join(
        f'{_svg_bar(fraction(c.used_gb, c.memory_gb), kind="bar card")} {c.used_gb:g}/{c.memory_gb:g} GB · '
        f'{c.pods} pod{"" if c.pods == 1 else "s"}'
        for c in cards)


def _topology(tree: Topology | None) -> str:
    """The HyperNode tree, top down, with each domain's free GPUs; nothing when the cluster has no HyperNode."""
    if tree is None:
        return ""
    rows = "".join(
        f'<tr><td>{"&nbsp;" * 4 * d.depth}{"└ " if d.depth else ""}{escape(d.name)}</td>'
        f'<td>{d.tier}{f" ({escape(d.tier_name)})" if d.tier_name else ""}</td><td>{d.nodes}</td>'
        f'<td>{_svg_bar(fraction(d.gpus_free, d.gpus))} {d.gpus_free:g} free / {d.gpus:g}</td></tr>'
        for d in tree.domains)
    notes = "".join(f'<p class="partial">The HyperNode tree is not used for scheduling (jobs with a network '
                    f'topology wait) while: {escape(c)}</p>' for c in tree.conflicts)
    notes += "".join(f'<p class="muted small">{escape(w)}</p>' for w in tree.warnings)
    return ('<h2>Network topology</h2>' + notes + '<table id="topology"><tr><th>HyperNode</th><th>Tier</th>'
            f'<th>Nodes</th><th>GPUs free</th></tr>{rows}</table>')


def _timeline(timeline: Timeline | None) -> str:
    """The last day: each queue's GPUs allocated vs deserved, the longest waits, and the idle-GPU candidates."""
    if timeline is None:
        return ""
    charts = "".join(f'<div class="chart-box"><div class="small q">{escape(c.name)}</div>'
                     f'{queue_chart(c, timeline.start, timeline.end)}</div>' for c in timeline.charts)
    note = f'<p class="muted small">{escape(timeline.note)}</p>' if timeline.note else ""
    waits = (wait_chart(timeline.waits) if timeline.waits
             else '<p class="muted small">no job waited over the last day</p>')
    idle = "".join(f'<tr><td>{escape(r.key)}</td><td>{escape(r.queue)}</td><td><span class="kind">'
                   f'{escape(r.reason)}</span></td><td>{escape(r.since)}</td><td class="small">{escape(r.message)}</td>'
                   '</tr>' for r in timeline.idle)
    idle_table = (f'<table id="idle"><tr><th>Job</th><th>Queue</th><th>State</th><th>Since</th><th>Why</th></tr>{idle}'
                  '</table>' if idle else '<p class="muted small" id="idle">no job\'s GPUs are idle '
                  '(or idle-GPU reclaim is off: lapilli serve --idle-gpu-mode)</p>')
    return ('<h2>Over the last day</h2><p class="muted small">GPUs allocated (solid) and deserved (dashed) per '
            f'queue, from {escape(timeline.source)}.</p>{note}<div id="charts">{charts}</div>'
            f'<h2>Waiting time per job</h2><div id="waits">{waits}</div>'
            f'<h2>Idle GPUs</h2>{idle_table}')


def fragment(page: Page) -> str:
    """The part the script refreshes."""
    queues = "".join(_queue(q) for q in page.queues) + _missing(page.missing)
    shared = any(n.cards for n in page.nodes)
    nodes = "".join(
        f'<tr><td>{escape(n.name)}</td><td>{_svg_bar(fraction(n.gpus_used, n.gpus))} {n.gpus_used:g} / {n.gpus:g}</td>'
        + (f'<td class="small">{_cards(n.cards)}</td>' if shared else "")
        + f'<td>{n.cpu_used:g} / {n.cpu:g}</td></tr>' for n in page.nodes)
    card_header = "<th>GPU memory per card</th>" if shared else ""
    return (
        f'{_partial(page)}<p class="muted small">as of {escape(page.at)} · scheduler conf: {escape(page.conf)}'
        f'{_estimated(page.estimated_at)}</p>'
        '<h2>Queues and jobs</h2><table id="queues"><tr><th>Queue / job</th><th>State / phase</th>'
        '<th>Weight / age</th><th>Share / reason</th><th>Allocated · deserved · capability / why</th></tr>'
        f'{queues}</table>{_timeline(page.timeline)}'
        f'<h2>Nodes</h2><table id="nodes"><tr><th>Node</th><th>GPU used</th>{card_header}<th>CPU used</th></tr>'
        f'{nodes}</table>{_topology(page.topology)}'
    )


def document(page: Page) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Lapilli</title>'
        '<link rel="icon" href="data:,">'
        f'<style>{_STYLE}</style></head><body><h1>Lapilli: queues, jobs and why they wait</h1>'
        f'<div id="live">{fragment(page)}</div>{_SCRIPT}</body></html>'
    )
