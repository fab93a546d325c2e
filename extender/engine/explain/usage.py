"""The ORDER reason's words when fairshare's decayed usage puts one queue before another: "lab-a used 1,900 GPU·h
(decayed, half-life 7d) against lab-b's 300 GPU·h: lab-b goes first", naming the queues at the level of the tree
where the two paths part (the labs, for two users of different labs)."""

from __future__ import annotations

from collections.abc import Mapping

from extender.engine.interface import ExplainView
from extender.engine.model import Queue
from extender.engine.plugins.fairshare import FairSharePlugin
from lapilli.meta import JSON
from lapilli.times import go_duration
from lapilli.usage import headline_resource, hours, usage_text


def half_life_text(seconds: float) -> str:
    """168h as people say it (7d); hours or Go's form when not whole days."""
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g}d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    return go_duration(seconds)


def _parting(paths: Mapping[str, list[str]], first: str, mine: str) -> tuple[str, str]:
    """The two queues, one on each path, where the paths from the top part (the queues themselves at worst)."""
    for ahead, behind in zip(paths.get(first, [first]), paths.get(mine, [mine]), strict=False):
        if ahead != behind:
            return ahead, behind
    return first, mine


def _units(queue: Queue, names: tuple[str, ...]) -> dict[str, float]:
    usage = queue.usage
    return {} if usage is None else {n: float(usage[i]) for i, n in enumerate(names) if usage[i] > 0}


def usage_order(ssn: ExplainView, first: str, mine: str) -> tuple[str, dict[str, JSON]] | None:
    """Why queue `first` goes before `mine` when fairshare's usage decides it (same priority, lower usage share
    where the paths part); None when fairshare does not order queues or the usage is not what separates them."""
    plugin = ssn.plugin("fairshare")
    queues = ssn.queues
    if not isinstance(plugin, FairSharePlugin) or not plugin.args.queue_order:
        return None
    if first not in queues or mine not in queues or queues[first].priority != queues[mine].priority:
        return None
    ahead, behind = _parting(plugin.paths, first, mine)
    if not plugin.shares.get(ahead, 0.0) < plugin.shares.get(behind, 0.0):
        return None
    theirs, ours = _units(queues[ahead], ssn.dims.names), _units(queues[behind], ssn.dims.names)
    resource = headline_resource(ours) or headline_resource(theirs)
    if resource is None:
        return None
    half_life = half_life_text(plugin.args.half_life)
    text = (f"{behind} used {usage_text(resource, ours.get(resource, 0.0))} (decayed, half-life {half_life}) "
            f"against {ahead}'s {usage_text(resource, theirs.get(resource, 0.0))}: "
            f"{ahead if ahead == first else f'{ahead} ({first})'} goes first")
    data: dict[str, JSON] = {
        "resource": resource, "halfLife": plugin.args.half_life,
        "usedHours": {behind: round(hours(resource, ours.get(resource, 0.0)), 3),
                      ahead: round(hours(resource, theirs.get(resource, 0.0)), 3)},
        "usageShare": {behind: round(plugin.shares[behind], 6), ahead: round(plugin.shares[ahead], 6)},
    }
    return text, data
