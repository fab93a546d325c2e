"""network-topology-aware: keep a gang inside one network domain (Volcano's `plugins/network-topology-aware`).

For a job or sub-gang in hard mode (soft mode was made hard up to the root's tier when the session opened) the
plugin answers where allocate may look (`HyperNodeGradientFor{Job,SubJob}Fn`): a breadth-first walk from the search
root keeping the HyperNodes of tier ≤ `highestTierAllowed` and, for a gang that holds no HyperNode yet, only those
whose idle or future idle (as the session opened) covers its minimum resources (`minResources` for a job, its
pending tasks' requests for a sub-gang), grouped by tier, lowest first. A gang that holds a HyperNode already is
searched under its ancestor at the highest allowed tier (`getSearchRoot`). For eviction the gradients are reversed,
widest first, and capped at `hypernode.gradient.evict.max-hypernodes` HyperNodes, and a HyperNode qualifies when its
allocatable covers the minimum. It scores HyperNodes and nodes (`network_scores.py`) and keeps each HyperNode's used
resources up to date as tasks are placed and taken back.

Arguments (validated when the conf loads; a negative weight, fading or cap falls back to its default as in Volcano):
`weight` (1), `hypernode.binpack.cpu` (1), `hypernode.binpack.memory` (1), `hypernode.binpack.resources` (comma list)
with `hypernode.binpack.resources.<name>` (1), `hypernode.binpack.normal-pod.enable` (true),
`hypernode.binpack.normal-pod.fading` (0.8), `hypernode.gradient.evict.max-hypernodes` (8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from extender.engine.arguments import Arguments, boolean, integer, number, text
from extender.engine.interface import PURPOSE_EVICT, EventHandler, Index, Scores, SessionView
from extender.engine.model import Job, SubJob, Task
from extender.engine.plugins.network_scores import MAX_NODE_SCORE, Scales, weight_vector
from extender.engine.registry import register_plugin
from extender.engine.rowmath import NodeRows, Num, Ops
from lapilli.resources.units import CPU, MEMORY
from lapilli.resources.vector import TOLERANCE, Vec

NAME: Final = "network-topology-aware"
RESOURCES_PREFIX: Final = "hypernode.binpack.resources."


@dataclass(frozen=True, slots=True)
class TopologyArgs:
    weight: int = 1
    weights: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))  # cpu, memory, then the listed resources
    normal_pod: bool = True
    fading: float = 0.8
    evict_max: int = 8


def _non_negative(value: int, default: int) -> int:
    return default if value < 0 else value


def parse_arguments(arguments: Arguments) -> TopologyArgs:
    weights = [(CPU, _non_negative(integer(arguments, "hypernode.binpack.cpu", 1), 1)),
               (MEMORY, _non_negative(integer(arguments, "hypernode.binpack.memory", 1), 1))]
    for name in text(arguments, "hypernode.binpack.resources", "").split(","):
        name = name.strip()
        if name:
            weights.append((name, _non_negative(integer(arguments, RESOURCES_PREFIX + name, 1), 1)))
    fading = number(arguments, "hypernode.binpack.normal-pod.fading", 0.8)
    evict_max = integer(arguments, "hypernode.gradient.evict.max-hypernodes", 8)
    return TopologyArgs(
        weight=_non_negative(integer(arguments, "weight", 1), 1),
        weights=tuple(weights),
        normal_pod=boolean(arguments, "hypernode.binpack.normal-pod.enable", True),
        fading=0.8 if fading < 0 else fading,  # 0 is allowed: only tier-1 HyperNodes then count for normal pods
        evict_max=8 if evict_max <= 0 else evict_max,
    )


def reverse_and_cap(gradients: list[list[str]], cap: int) -> list[list[str]]:
    """`reverseAndCapEvictionGradients`: widest tier first, at most `cap` HyperNodes, the last ones of a tier kept
    when it is cut."""
    if cap <= 0:
        return gradients
    left, out = cap, []
    for gradient in reversed(gradients):
        if left == 0:
            break
        taken = gradient if len(gradient) <= left else gradient[len(gradient) - left:]
        out.append(taken)
        left -= len(taken)
    return out


class TopologyScorer:
    """The node order: row-local part 0, everything in the part normalised over the candidates."""

    def __init__(self, plugin: NetworkTopologyPlugin, active: bool) -> None:
        self.plugin, self.active = plugin, active

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        return 0.0

    def normalizes(self, task: Task) -> bool:
        return self.active

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        return self.plugin.node_scores(task, idx)


class NetworkTopologyPlugin:
    name = NAME

    def __init__(self, args: TopologyArgs) -> None:
        self.args = args
        self.ssn: SessionView | None = None
        self.scales: Scales | None = None

    def on_session_open(self, ssn: SessionView) -> None:
        self.ssn = ssn
        topo, arrays = ssn.topology, ssn.arrays
        allocatable = topo.aggregate(arrays.allocatable)
        used = topo.aggregate(arrays.used)
        self.scales = Scales(
            topo=topo, row_of={name: node.idx for name, node in ssn.node_by_name.items()},
            weights=weight_vector(ssn.dims.index, self.args.weights), allocatable=allocatable, used=used,
            idle=allocatable - used, future_idle=topo.aggregate(arrays.future_idle()),
            global_weight=float(self.args.weight), fading=self.args.fading,
            min_tier=topo.tree.tiers[0], max_tier=topo.tree.tiers[-1],
        )
        with_topology = any(job.subjobs is not None and any(s.topology is not None for s in job.subjobs.values())
                            for job in ssn.jobs.values())
        ssn.add_node_order(TopologyScorer(self, with_topology or (self.args.normal_pod and topo.has_hypernodes)))
        ssn.add_hypernode_order(self.scales.hypernode_order)
        ssn.add_hypernode_gradient_for_job(self.job_gradients)
        ssn.add_hypernode_gradient_for_subjob(self.subjob_gradients)
        ssn.add_event_handler(EventHandler(allocate=lambda t: self._moved(t, 1),
                                           deallocate=lambda t: self._moved(t, -1)))

    def on_session_close(self, ssn: SessionView) -> None:
        self.ssn = self.scales = None

    def _moved(self, task: Task, sign: int) -> None:
        assert self.scales is not None
        row = self.scales.row_of.get(task.node or "")
        if row is not None:
            held = self.scales.topo.holders(row)
            self.scales.used[held] += task.resreq if sign > 0 else -task.resreq

    # ---- node order --------------------------------------------------------------------------------------------
    def node_scores(self, task: Task, idx: Index) -> Scores | None:
        assert self.ssn is not None and self.scales is not None
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return None
        sub = job.subjob_of.get(task.uid) if job.subjobs is not None else None
        if sub is not None and sub.topology is not None:
            scores = self.scales.network_aware(task, sub, idx)
        elif self.args.normal_pod and self.scales.topo.has_hypernodes:
            scores = self.scales.normal(task, idx)
        else:
            return None
        return MAX_NODE_SCORE * self.args.weight * scores

    # ---- gradients ---------------------------------------------------------------------------------------------
    def job_gradients(self, job: Job, root: str, purpose: str) -> list[list[str]]:
        tier = job.topology.hard_tier() if job.topology is not None else None
        if tier is None:
            return [[root]]
        assert self.ssn is not None
        need = job.min_resources if job.min_resources is not None else self.ssn.dims.zeros()
        return self._gradients(root, tier, job.allocated_hypernode, need, purpose)

    def subjob_gradients(self, subjob: SubJob, root: str, purpose: str) -> list[list[str]]:
        tier = subjob.hard_tier()
        if tier is None:
            return [[root]]
        assert self.ssn is not None
        need = self.ssn.dims.zeros()
        for task in subjob.pending_tasks():
            need = need + task.resreq
        return self._gradients(root, tier, subjob.allocated_hypernode, need, purpose)

    def _gradients(self, available: str, tier: int, held: str, need: Vec, purpose: str) -> list[list[str]]:
        """`hyperNodeGradientFn`: breadth first from the search root, the eligible HyperNodes by tier."""
        assert self.scales is not None
        topo = self.scales.topo
        root = self._search_root(available, tier, held)
        if root is None:
            return []
        queue, seen = [root], {root}
        eligible: dict[int, list[str]] = {}
        while queue:
            current = queue.pop(0)
            current_tier = topo.tier_of(current)
            if current_tier is not None and self._eligible(current, current_tier, tier, held, need, purpose):
                eligible.setdefault(current_tier, []).append(current)
            for child in topo.children(current):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        gradients = [eligible[t] for t in sorted(eligible)]
        return reverse_and_cap(gradients, self.args.evict_max) if purpose == PURPOSE_EVICT else gradients

    def _eligible(self, name: str, tier: int, limit: int, held: str, need: Vec, purpose: str) -> bool:
        assert self.scales is not None
        if tier > limit:
            return False
        if held:
            return True  # a gang partly placed is not pre-filtered
        i = self.scales.topo.index.index[name]
        if purpose == PURPOSE_EVICT:
            return bool(np.all(need < self.scales.allocatable[i] + TOLERANCE))
        scales = self.scales
        return bool(np.all(need < scales.idle[i] + TOLERANCE) or np.all(need < scales.future_idle[i] + TOLERANCE))

    def _search_root(self, available: str, tier: int, held: str) -> str | None:
        """`getSearchRoot`: `available`, narrowed for a gang already holding `held` to its ancestor at the highest
        allowed tier; None when the two do not nest."""
        if not held:
            return available
        assert self.scales is not None
        topo = self.scales.topo
        highest = ""
        for name in topo.tree.ancestors(held):
            name_tier = topo.tier_of(name)
            if name_tier is None:
                return None
            if name_tier > tier:
                break
            highest = name
        if not highest:
            return None
        lca = topo.lca(available, highest)
        if lca == highest:
            return available
        return highest if lca == available else None


register_plugin(NAME, parse_arguments, NetworkTopologyPlugin)
