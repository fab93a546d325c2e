"""Why a gang with a hard network topology has no place: no HyperNode it may use has the room, with numbers.

For the job (and each sub-gang) whose `networkTopology` bounds it to HyperNodes of tier ≤ N (after the session's
preparation: names translated, soft mode already allowed everywhere), the HyperNodes it may use are those of tier ≤ N
under where its placed pods already are (Volcano's search root); their free room (allocatable − used, summed over
their nodes, as the session opened) is set against what the pods still to be placed ask. The message names the
scarcest resource: "no HyperNode of tier ≤ 1 has 16 free nvidia.com/gpu (best: leaf-3 with 12)", or, when each
resource is there in sum but not on nodes a pod fits, the pods that fit: "no HyperNode of tier ≤ 1 has room for 4
pods as they ask (best: leaf-3, room for 3)". A tree the scheduler cannot use (a cycle, a HyperNode with two
parents) is a reason of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from extender.engine.explain.report import Kind, Reason
from extender.engine.explain.units import amount, number, resource_rank
from extender.engine.interface import ExplainView
from extender.engine.model import Job, Task, TaskStatus
from lapilli.meta import JSON
from lapilli.resources.units import PODS
from lapilli.resources.vector import TOLERANCE, Vec

NETWORK_TOPOLOGY = "network-topology-aware"


@dataclass(frozen=True, slots=True)
class _Gang:
    what: str  # "" for the job, "sub-group <id>" for a sub-gang
    tier: int
    held: str
    tasks: list[Task]


def topology_reasons(ssn: ExplainView, job: Job) -> list[Reason]:
    """The topology reasons for an admitted job that is not placed (none for a job without a hard topology)."""
    if job.subjobs is None or ssn.plugin(NETWORK_TOPOLOGY) is None:
        return []  # without the plugin Volcano places such a job anywhere: the topology blocks nothing
    topo = ssn.topology
    if not topo.ready:
        problems = "; ".join(topo.tree.conflicts)
        return [Reason(Kind.TOPOLOGY, f"the HyperNode tree cannot be used, so jobs with a network topology wait: "
                       f"{problems}", {"conflicts": list(topo.tree.conflicts)})]
    out: list[Reason] = []
    for gang in _gangs(ssn, job):
        reason = _shortage(ssn, gang)
        if reason is not None:
            out.append(reason)
    return out


def _gangs(ssn: ExplainView, job: Job) -> list[_Gang]:
    assert job.subjobs is not None
    root_tier = ssn.topology.tree.root.tier
    out = []
    tier = job.topology.hard_tier() if job.topology is not None else None
    if tier is not None and tier < root_tier:
        wanted = max(job.min_member - job.ready_num(), 0)
        out.append(_Gang("", tier, job.allocated_hypernode, _pending(job.tasks.values(), wanted)))
    for sub in sorted(job.subjobs.values(), key=lambda s: s.uid):
        sub_tier = sub.hard_tier()
        if sub.uid == job.uid or sub_tier is None or sub_tier >= root_tier or not job.has_policy:
            continue
        if sub.is_ready():
            continue
        wanted = max(sub.min_available - sub.ready_num(), 0)
        pending = _pending(sub.tasks.values(), wanted)
        out.append(_Gang(f"sub-group {sub.uid}", sub_tier, sub.allocated_hypernode, pending))
    return out


def _pending(tasks: Iterable[Task], wanted: int) -> list[Task]:
    pending = sorted((t for t in tasks if t.status is TaskStatus.PENDING and not t.best_effort),
                     key=lambda t: (t.index if t.index is not None else 0, t.name))
    return pending[:wanted] if wanted else pending


def _candidates(ssn: ExplainView, gang: _Gang) -> list[str]:
    """The HyperNodes of tier ≤ the limit under the gang's search root."""
    topo = ssn.topology
    root = topo.root
    if gang.held:
        root = ""
        for name in topo.tree.ancestors(gang.held):
            tier = topo.tier_of(name)
            if tier is None or tier > gang.tier:
                break
            root = name
        if not root:
            return []
    out, stack = [], [root]
    while stack:
        name = stack.pop()
        tier = topo.tier_of(name)
        if tier is not None and tier <= gang.tier:
            out.append(name)
        stack.extend(topo.children(name))
    return sorted(out)


def _shortage(ssn: ExplainView, gang: _Gang) -> Reason | None:
    if not gang.tasks:
        return None
    names = _candidates(ssn, gang)
    where = f"{gang.what}: " if gang.what else ""
    within = f"under {gang.held} " if gang.held else ""
    if not names:
        return Reason(Kind.TOPOLOGY, f"{where}no HyperNode of tier ≤ {gang.tier} {within}exists",
                      {"tier": gang.tier, "hypernodes": []})
    dims = ssn.dims
    need: Vec = dims.zeros()
    for task in gang.tasks:
        need = need + task.resreq
    free = {name: _free(ssn, name) for name in names}
    short = [(name, float(need[i])) for i, name in enumerate(dims.names)
             if name != PODS and need[i] >= TOLERANCE and all(need[i] > f[i] + TOLERANCE for f in free.values())]
    data: dict[str, JSON] = {"tier": gang.tier, "pods": len(gang.tasks), "hypernodes": len(names)}
    if short:
        resource, wanted = min(short, key=lambda s: resource_rank(s[0]))
        col = dims.index[resource]
        best = max(names, key=lambda n: (free[n][col], [-ord(c) for c in n]))
        data.update(resource=resource, need=number(resource, wanted), best=best,
                    bestFree=number(resource, float(free[best][col])))
        text = f"has {amount(resource, wanted)} free {resource} (best: {best} with "
        return Reason(Kind.TOPOLOGY, f"{where}no HyperNode of tier ≤ {gang.tier} {within}{text}"
                      f"{amount(resource, float(free[best][col]))})", data)
    room = {name: _room(ssn, name, gang.tasks) for name in names}
    if all(r >= len(gang.tasks) for r in room.values()):
        return None  # room enough somewhere: the placement reasons say what else blocks it
    best = max(names, key=lambda n: (room[n], [-ord(c) for c in n]))
    data.update(best=best, bestRoom=room[best])
    return Reason(Kind.TOPOLOGY, f"{where}no HyperNode of tier ≤ {gang.tier} {within}has room for "
                  f"{len(gang.tasks)} pods as they ask (best: {best}, room for {room[best]})", data)


def _free(ssn: ExplainView, name: str) -> Vec:
    rows = ssn.topology.rows_of(name)
    arrays = ssn.arrays
    return (arrays.allocatable[rows] - arrays.used[rows]).sum(axis=0) if len(rows) else ssn.dims.zeros()


def _room(ssn: ExplainView, name: str, tasks: list[Task]) -> int:
    """How many of `tasks` (alike: the first one's request stands for all) fit the idle room of the HyperNode's
    nodes, each node holding as many as its scarcest resource allows."""
    rows = ssn.topology.rows_of(name)
    if not len(rows):
        return 0
    req = tasks[0].resreq
    asked = req >= TOLERANCE
    if not asked.any():
        return len(tasks)
    idle = ssn.arrays.allocatable[rows] - ssn.arrays.used[rows]
    per_node = np.floor((idle[:, asked] + TOLERANCE) / req[asked]).min(axis=1)
    return int(np.clip(per_node, 0, None).sum())


__all__ = ["topology_reasons"]
