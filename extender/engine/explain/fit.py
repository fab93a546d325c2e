"""Where a gang's pending pods could go: how many of `minMember` fit, and what blocks the rest on how many nodes.

The count is the engine's own placement (the session's `choose` in task order, through a `trial`: a Statement whose
moves are always discarded), so a pod counted as placeable is one allocate would place. A node that refuses a pod is
named by its first blocker: a static predicate (cordoned, a taint the pod does not tolerate, node selector or
affinity), else the resource with too little free room, devices first; a pod sharing GPUs that no node's cards
admit also gets the card that came closest (`no card with 20 GB free: best sim-node-3 card 1 with 12 GB`). The
predicate verdict is the session's; the predicates plugin's own helpers name it, and the other filters (ports, pod
affinity, topology spread, vGPU cards) in their own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cmp_to_key

from extender.engine.explain.units import amount, resource_rank
from extender.engine.interface import ExplainView
from extender.engine.model import Job, Node, Task
from lapilli.resources.units import PODS
from lapilli.resources.vector import TOLERANCE


@dataclass(slots=True)
class GangFit:
    ready: int  # pods already placed (bound, running, succeeded)
    placeable: int  # pending pods the engine can place now
    min_member: int
    pending: int
    blocked: str = ""  # first pod that found no node
    nodes: dict[str, int] = field(default_factory=dict)  # blocker -> nodes
    cards: str = ""  # for a pod sharing GPUs that found no card: the card that came closest

    @property
    def fits(self) -> bool:
        return self.ready + self.placeable >= self.min_member

    def summary(self) -> str:
        """`2 of 4 pods placeable: 6 nodes lack nvidia.com/gpu (need 1), 2 nodes are tainted a=b:NoSchedule`."""
        have = min(self.ready + self.placeable, self.min_member)
        text = f"{have} of {self.min_member} pods placeable"
        if self.nodes:
            text += ": " + ", ".join(_nodes_phrase(n, why) for why, n in self.nodes.items())
        if self.cards:
            text += f"; {self.cards}"
        return text


_SINGULAR = {"are": "is", "have": "has", "lack": "lacks", "do": "does", "fail": "fails"}
NODES = "node(s) "  # how kube-scheduler's filters start their reasons


def _nodes_phrase(count: int, why: str) -> str:
    """`6 nodes lack …` / `1 node lacks …` (the blockers are written for several nodes)."""
    if count != 1:
        return f"{count} nodes {why}"
    verb, _, rest = why.partition(" ")
    return f"1 node {_SINGULAR.get(verb, verb)} {rest}"


def node_blocker(ssn: ExplainView, task: Task, node: Node) -> str:
    """Why `task` cannot go to `node` now, in words ("" if it can)."""
    if not ssn.predicate_node(task, node):
        if node.unschedulable:
            return "are cordoned (unschedulable)"
        taints = task.placement.untolerated(node.taints)
        if taints:
            return "are tainted " + ", ".join(str(t) for t in taints)
        if not task.placement.matches_node(node.labels, node.name):
            return "do not match the pod's node selector/affinity"
        # The other predicates' own words ("node(s) didn't match pod anti-affinity rules"), for several nodes.
        for reason in ssn.predicate_reasons(task, node):
            if reason.startswith(NODES):
                return reason.removeprefix(NODES)
        return "fail a scheduling predicate (host port or other)"
    future = ssn.arrays.future_idle_row(node.idx)
    allocatable = ssn.arrays.allocatable[node.idx]
    short = [
        (name, i) for i, name in enumerate(ssn.dims.names)
        if task.resreq[i] >= future[i] + TOLERANCE
    ]
    if not short:
        return ""
    name, i = min(short, key=lambda item: resource_rank(item[0]))
    need = amount(name, float(task.resreq[i]))
    if allocatable[i] < task.resreq[i] - TOLERANCE:
        if allocatable[i] < TOLERANCE and name != PODS:
            return f"have no {name} (need {need})"
        return f"are too small for {name} (need {need}, have {amount(name, float(allocatable[i]))})"
    return f"lack free {name} (need {need}, free {amount(name, max(float(future[i]), 0.0))})"


def blockers(ssn: ExplainView, task: Task) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in ssn.nodes:
        why = node_blocker(ssn, task, node)
        if why:
            counts[why] = counts.get(why, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def gang_fit(ssn: ExplainView, job: Job) -> GangFit:
    """Place the job's pending pods in task order as allocate would, count them, and undo it."""
    tasks = sorted(job.pending_tasks(), key=cmp_to_key(ssn.task_order))
    fit = GangFit(ready=job.ready_num(), placeable=0, min_member=job.min_member, pending=len(tasks))
    stmt = ssn.trial()
    try:
        for task in tasks:
            choice = ssn.choose(task)
            if choice is None:
                if not fit.blocked:
                    fit.blocked = task.key
                    fit.nodes = blockers(ssn, task)
                    fit.cards = ssn.local_summary(task)
                continue
            node, idle = choice
            if idle:
                stmt.allocate(task, node)
            else:
                stmt.pipeline(task, node)
            fit.placeable += 1
    finally:
        stmt.discard()
    if not ssn.nodes:
        fit.nodes = {"exist (the cluster has no ready node)": 0}
    return fit
