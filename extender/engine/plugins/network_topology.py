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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

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
    """The node order of pods with a network topology: nothing row-local; the LCA-tier score over the candidates,
    computed at pick time. Allocate asks for it (`Placement.choose_in(..., rescore=True)`) only where it varies:
    a gang whose HyperNode spans several lowest-tier ones; inside one, every node scores the same."""

    def __init__(self, plugin: NetworkTopologyPlugin) -> None:
        self.plugin = plugin

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        return 0.0

    def normalizes(self, task: Task) -> bool:
        return False

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        return self.plugin.aware_scores(task, idx)


class NetworkTopologyPlugin:
    name = NAME

    def __init__(self, args: TopologyArgs) -> None:
        self.args = args
        self.ssn: SessionView | None = None
        self.scales: Scales | None = None
        self._rows: Mapping[str, int] = {}  # node name -> row
        self._path_of: list[int] = []  # per node row: its path (`TreeIndex.path_of`)
        self._known: dict[tuple[str, int, str, bytes, str], list[list[str]]] = {}  # gradients asked this session
        self._rooms: dict[tuple[bytes, str], npt.NDArray[np.bool_]] = {}  # `_room` answers this session
        self._aware: set[str] = set()  # the tasks whose sub-gang has a network topology (they get no node bonus)

    def on_session_open(self, ssn: SessionView) -> None:
        self.ssn, self._known, self._rooms = ssn, {}, {}
        self._aware = set()
        for job in ssn.jobs.values():
            for sub in (job.subjobs or {}).values():
                if sub.topology is not None:
                    self._aware.update(sub.tasks)
        topo, arrays = ssn.topology, ssn.arrays
        dims = arrays.allocatable.shape[1]
        future_idle = arrays.future_idle()
        sums = topo.aggregate(np.hstack([arrays.allocatable, arrays.used, future_idle]))  # one pass for the three
        allocatable, used = sums[:, :dims], sums[:, dims:2 * dims].copy()
        self.scales = Scales(
            topo=topo, row_of=topo.index.row_of, path_of=topo.index.path_list,
            weights=weight_vector(ssn.dims.index, self.args.weights), allocatable=allocatable, used=used,
            idle=allocatable - used, future_idle=sums[:, 2 * dims:],
            global_weight=float(self.args.weight), fading=self.args.fading,
            min_tier=topo.tree.tiers[0], max_tier=topo.tree.tiers[-1],
        )
        if topo.has_hypernodes and any(job.subjobs is not None for job in ssn.jobs.values()):
            # allocate skips HyperNodes a gang cannot fit (hyperallocate.py)
            topo.track(self.scales.future_idle.copy(), self._settle)
        ssn.add_node_order(TopologyScorer(self))
        if self.args.normal_pod and topo.has_hypernodes:
            ssn.add_node_bonus(self.normal_scores)
        ssn.add_hypernode_order(self.scales.hypernode_order)
        ssn.add_hypernode_gradient_for_job(self.job_gradients)
        ssn.add_hypernode_gradient_for_subjob(self.subjob_gradients)
        self._rows = self.scales.row_of
        self._path_of = self.scales.path_of
        ssn.add_event_handler(EventHandler(allocate=self._taken, deallocate=self._given))

    def on_session_close(self, ssn: SessionView) -> None:
        self.ssn = self.scales = None
        self._known, self._rooms, self._aware = {}, {}, set()

    # An allocation or pipelining takes the request from the node's HyperNodes, an undo or a release gives it back:
    # their `used` here (Volcano's resource cache) and their future idle (`Topology.free`), counted when next read
    # (`Scales.settle`).
    def _taken(self, task: Task) -> None:
        row = self._rows.get(task.node or "")
        if row is not None:
            assert self.scales is not None
            self.scales.moves.append((self._path_of[row], task.resreq))

    def _settle(self) -> None:
        if self.scales is not None:
            self.scales.settle()

    def _given(self, task: Task) -> None:
        row = self._rows.get(task.node or "")
        if row is not None:
            assert self.scales is not None
            self.scales.moves.append((self._path_of[row], -task.resreq))

    # ---- node order --------------------------------------------------------------------------------------------
    def node_scores(self, task: Task, idx: Index) -> Scores | None:
        """The plugin's node scores of `task` over candidates `idx`, as Volcano's `batchNodeOrderFn` gives them
        (None: it scores nothing for this task)."""
        assert self.ssn is not None
        job = self.ssn.jobs.get(task.job)
        sub = job.subjob_of.get(task.uid) if job is not None and job.subjobs is not None else None
        if sub is not None and sub.topology is not None:
            return self.aware_scores(task, idx, exact=True)
        scores = self.normal_scores(task)
        return None if scores is None else scores[idx]

    def aware_scores(self, task: Task, idx: Index, exact: bool = False) -> Scores | None:
        """`batchNodeOrderFnForNetworkAwarePods`, scaled (unless `exact`, None where it does not tell the
        candidates apart)."""
        assert self.ssn is not None and self.scales is not None
        job = self.ssn.jobs.get(task.job)
        sub = job.subjob_of.get(task.uid) if job is not None and job.subjobs is not None else None
        if sub is None or sub.topology is None:
            return None
        aware = self.scales.network_aware(task, sub, idx, exact)
        return None if aware is None else MAX_NODE_SCORE * self.args.weight * aware

    def normal_scores(self, task: Task) -> Scores | None:
        """`batchNodeOrderFnForNormalPods` over every node, scaled: the node bonus of a pod without a topology."""
        if task.uid in self._aware:
            return None
        assert self.ssn is not None and self.scales is not None
        job = self.ssn.jobs.get(task.job)
        if job is None or not self.args.normal_pod or not self.scales.topo.has_hypernodes:
            return None
        return MAX_NODE_SCORE * self.args.weight * self.scales.normal(task)

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
        pending = subjob.pending_tasks()
        if not pending:
            need = self.ssn.dims.zeros()
        elif all(task.resreq is pending[0].resreq for task in pending):  # one pod template: one request vector
            need = pending[0].resreq * len(pending)
        else:
            need = np.stack([task.resreq for task in pending]).sum(axis=0)
        return self._gradients(root, tier, subjob.allocated_hypernode, need, purpose)

    def _gradients(self, available: str, tier: int, held: str, need: Vec, purpose: str) -> list[list[str]]:
        """`hyperNodeGradientFn`: breadth first from the search root, the eligible HyperNodes by tier. It reads
        only the tree and the session-open resources, so the session keeps each answer (gangs of one shape ask
        the same question)."""
        key = (available, tier, held, need.tobytes(), purpose)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = self._gradients_now(available, tier, held, need, purpose)
        return [list(gradient) for gradient in known]

    def _gradients_now(self, available: str, tier: int, held: str, need: Vec, purpose: str) -> list[list[str]]:
        assert self.scales is not None
        topo = self.scales.topo
        root = self._search_root(available, tier, held)
        if root is None:
            return []
        if not topo.children(root):  # a HyperNode with none under it (a leaf, usually) is its own one gradient
            at = topo.index.index.get(root)
            fits = at is not None and int(topo.index.tier[at]) <= tier and (
                bool(held) or bool(self._room(need, purpose)[at]))
            return [[root]] if fits else []
        order = np.array(topo.breadth_first(root), dtype=np.intp)
        keep = topo.index.tier[order] <= tier
        if not held:  # a gang partly placed is not pre-filtered
            keep &= self._room(need, purpose)[order]
        eligible: dict[int, list[str]] = {}
        names, tiers = topo.index.names, topo.index.tier
        for i, t in zip(order[keep].tolist(), tiers[order[keep]].tolist(), strict=True):
            eligible.setdefault(t, []).append(names[i])
        gradients = [eligible[t] for t in sorted(eligible)]
        return reverse_and_cap(gradients, self.args.evict_max) if purpose == PURPOSE_EVICT else gradients

    def _room(self, need: Vec, purpose: str) -> npt.NDArray[np.bool_]:
        """`isEligibleHyperNode`'s resource check over every HyperNode, with the session-open numbers: the
        minimum fits their allocatable (eviction), else their idle or their future idle (kept per minimum)."""
        assert self.scales is not None
        key = (need.tobytes(), purpose)
        known = self._rooms.get(key)
        if known is None:
            scales = self.scales
            if purpose == PURPOSE_EVICT:
                known = np.all(need < scales.allocatable + TOLERANCE, axis=1)
            else:
                idle = np.all(need < scales.idle + TOLERANCE, axis=1)
                known = idle | np.all(need < scales.future_idle + TOLERANCE, axis=1)
            self._rooms[key] = known
        return known

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
