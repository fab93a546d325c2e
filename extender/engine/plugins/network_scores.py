"""The network-topology-aware plugin's scores (Volcano's `plugins/network-topology-aware`: `HyperNodeOrderFn`,
`batchNodeOrderFnForNetworkAwarePods`, `batchNodeOrderFnForNormalPods`, `scaleFinalScore`).

* HyperNode binpack of a sub-gang: over the weighted resources its tasks ask for (each task's resources of at least
  0.1), Σ w·(used + request)/allocatable / Σ w of the HyperNode, 0 when the request overflows it; the HyperNodes at the
  highest score are told apart by the share of the sub-gang's tasks already in them.
* Node score of a task with a network topology: by the tier of the lowest common HyperNode of the node's lowest-tier
  HyperNode and the HyperNodes its sub-gang holds so far, (maxTier − tier)/(maxTier − minTier) (1 in that very
  HyperNode, 0 while it holds none); the nodes at the highest score are told apart by the same task share.
* Node score of any other task: the HyperNode binpack of the task alone summed over every tier from the lowest to the
  root's with weight fading^(tier − 1) (a tier with no HyperNode over the node counts as full), divided by the weights'
  sum, so pods without a topology still fill HyperNodes that are already busy.
Every score is scaled by MaxNodeScore (100) × `weight`. `Scales` holds what these read, per session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from extender.engine.hypernodes import Topology
from extender.engine.interface import Index, Scores
from extender.engine.model import SubJob, Task
from lapilli.resources.vector import TOLERANCE, Vec

MAX_NODE_SCORE = 100.0
SCALAR_MAX = 8  # HyperNodes refreshed one by one in floats up to this many, with numpy beyond
Matrix = npt.NDArray[np.float64]


@dataclass(slots=True)
class _NormalClass:
    """One request's HyperNode binpack (its last entry: the full score of a tier with no HyperNode)."""

    dims: npt.NDArray[np.bool_]
    per_hypernode: Scores
    seen: int  # how much of `Scales.changed` it reflects


@dataclass(slots=True)
class Scales:
    """A session's HyperNode resources (Volcano's `hyperNodeResourceCache`: allocatable, idle and future idle as
    the session opened, used kept up to date by the plugin's event handler) and the resource weights.

    The event handler only notes each placement's move (`moves`: the node's path, the request signed); `settle`
    counts them into `used` and the topology's `free` before anything reads either. A gang's dozen placements are
    then one batched update instead of a dozen, each HyperNode's sums taken in the same order as one by one."""

    topo: Topology
    row_of: Mapping[str, int]  # node name -> row
    path_of: list[int]  # node row -> its path (`TreeIndex.path_of`)
    weights: npt.NDArray[np.float64]  # per resource dimension; 0 where the plugin does not weigh it
    allocatable: Matrix
    used: Matrix
    idle: Matrix
    future_idle: Matrix
    global_weight: float
    fading: float
    min_tier: int
    max_tier: int
    changed: list[int] = field(default_factory=list)  # HyperNodes whose `used` moved, in order (the classes' log;
    # up to date once settled)
    moves: list[tuple[int, Vec]] = field(default_factory=list)  # (path, ± request) not yet in `used` / `free`
    _normal: dict[bytes, _NormalClass] = field(default_factory=dict)
    _lca_scores: dict[str, Scores] = field(default_factory=dict)
    # sub-gang uid (or pod template and count) -> `subjob_request`
    _requests: dict[str | bytes, tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]] = field(default_factory=dict)
    _tier_weights: npt.NDArray[np.float64] | None = None
    _weighed: dict[bytes, tuple[npt.NDArray[np.float64], float]] = field(default_factory=dict)  # dims -> weights, Σ
    _room_above_zero: npt.NDArray[np.bool_] | None = None  # allocatable > 0, per HyperNode and resource
    _binpacks: dict[str, tuple[int, Scores]] = field(default_factory=dict)  # sub-gang -> (len(changed), …)

    def settle(self) -> None:
        """Count the moves noted since the last call into `used` (+) and the topology's `free` (−)."""
        moves = self.moves
        if not moves:
            return
        paths, free = self.topo.index.path_members, self.topo.free
        path_lists, changed = self.topo.index.path_lists, self.changed
        for path, _ in moves:
            changed.extend(path_lists[path])
        if len(moves) == 1:
            held, vec = paths[moves[0][0]], moves[0][1]
        else:  # `ufunc.at` adds the rows in the order given: each HyperNode's sum as with one call per move
            helds = [paths[path] for path, _ in moves]
            held = np.concatenate(helds)
            vec = np.repeat(np.array([v for _, v in moves]), [len(h) for h in helds], axis=0)
        np.add.at(self.used, held, vec)
        if free is not None:
            np.subtract.at(free, held, vec)
        moves.clear()

    # ---- HyperNode binpack -------------------------------------------------------------------------------------
    def binpack(self, request: npt.NDArray[np.float64], dims: npt.NDArray[np.bool_], rows: Index | None) -> Scores:
        """The binpack of `request` over the resource dimensions `dims` in HyperNodes `rows` (indices; None for
        every HyperNode), in [0, 1]."""
        key = dims.tobytes()
        weighed = self._weighed.get(key)
        if weighed is None:
            weights = np.where(dims, self.weights, 0.0)
            weighed = self._weighed[key] = (weights, float(weights.sum()))
        weights, total_weight = weighed
        if total_weight <= 0:
            return np.zeros(len(self.used) if rows is None else len(rows))
        if self._room_above_zero is None:
            self._room_above_zero = self.allocatable > 0
        after = (self.used if rows is None else self.used[rows]) + request
        alloc = self.allocatable if rows is None else self.allocatable[rows]
        positive = self._room_above_zero if rows is None else self._room_above_zero[rows]
        # (ufuncs' own reductions: the array methods go through a Python wrapper, a few µs per call here)
        over = np.logical_or.reduce((after > alloc) & dims, axis=1)
        share = np.divide(after, alloc, out=np.zeros(after.shape), where=positive)
        return np.where(over, 0.0, np.add.reduce(share * weights, axis=1) / total_weight)

    def _binpack_one(self, request: list[float], terms: list[tuple[int, float]], row: int) -> float:
        """`binpack` for one HyperNode, over Python floats (the same operations in the same order)."""
        total_weight = sum(w for _, w in terms)
        if total_weight <= 0:
            return 0.0
        used, alloc = self.used[row], self.allocatable[row]
        score = 0.0
        for d, w in terms:
            after, room = float(used[d]) + request[d], float(alloc[d])
            if after > room:
                return 0.0
            score += (after / room if room > 0 else 0.0) * w
        return score / total_weight

    def subjob_request(self, subjob: SubJob) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """Σ of the sub-gang's tasks' requests over the resources each asks for (≥ 0.1) that carry a weight (its
        tasks do not change during a session: kept per sub-gang)."""
        known = self._requests.get(subjob.uid)
        if known is not None:
            return known
        vectors = [task.resreq for task in subjob.tasks.values()]
        shape: bytes | None = None  # sub-gangs of one pod template and size ask the same: computed once for them
        if vectors and all(v is vectors[0] for v in vectors):
            shape = vectors[0].tobytes() + len(vectors).to_bytes(8, "little")
            known = self._requests.get(shape)
        if known is None:
            if not vectors:
                known = (np.zeros(len(self.weights)), np.zeros(len(self.weights), dtype=bool))
            else:
                requests = np.stack(vectors)
                asked = requests >= TOLERANCE
                known = (np.where(asked, requests, 0.0).sum(axis=0), asked.any(axis=0) & (self.weights > 0))
            if shape is not None:
                self._requests[shape] = known
        self._requests[subjob.uid] = known
        return known

    def task_share(self, subjob: SubJob, hypernodes: Index) -> Scores:
        """The share of the sub-gang's tasks placed in each of `hypernodes` (`scoreWithTaskNum`; 0 without
        tasks)."""
        return self._shares(subjob)[hypernodes]

    def _shares(self, subjob: SubJob) -> Scores:
        """`task_share` of every HyperNode, and one more entry, 0, for nodes under none."""
        index = self.topo.index
        paths: dict[int, int] = {}  # the placed tasks' nodes by path (the HyperNodes holding them)
        path_of, row_of = self.path_of, self.row_of
        for task in subjob.tasks.values():
            row = row_of.get(task.node) if task.node else None
            if row is not None:
                path = path_of[row]
                paths[path] = paths.get(path, 0) + 1
        counts = np.zeros(len(index.names) + 1)
        if not paths:
            return counts
        for path, count in paths.items():
            counts[index.path_members[path]] += count
        return counts / len(subjob.tasks)

    def hypernode_order(self, subjob: SubJob, hypernodes: Index) -> Scores:
        """`HyperNodeOrderFn`, scaled."""
        self.settle()
        known = self._binpacks.get(subjob.uid)
        if known is None or known[0] != len(self.changed):  # every HyperNode's, kept until some `used` moves
            request, dims = self.subjob_request(subjob)
            known = self._binpacks[subjob.uid] = (len(self.changed), self.binpack(request, dims, None))
        scores = known[1][hypernodes]
        if len(scores) > 1:
            tied = (scores == np.maximum.reduce(scores)).nonzero()[0]
            if len(tied) > 1:
                scores[tied] += self.task_share(subjob, hypernodes[tied])
        return (MAX_NODE_SCORE * self.global_weight) * scores

    # ---- node scores -------------------------------------------------------------------------------------------
    def tier_score(self, tier: int) -> float:
        if self.min_tier == self.max_tier:
            return 1.0
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return 0.0

    def lca_scores(self, held: str) -> Scores:
        """Per lowest-tier HyperNode index (and one more entry, 0, for nodes under none): the tier score of its LCA
        with `held`. Kept per `held` for the session."""
        scores = self._lca_scores.get(held)
        if scores is None:
            index = self.topo.index
            scores = np.zeros(len(index.names) + 1)
            at = index.index.get(held)
            if at is not None:
                tiers = index.lca_tiers(at)
                if self.min_tier == self.max_tier:
                    scores[:-1] = np.where(tiers >= 0, 1.0, 0.0)
                else:
                    inside = (tiers >= self.min_tier) & (tiers <= self.max_tier)
                    scores[:-1] = np.where(inside, (self.max_tier - tiers) / (self.max_tier - self.min_tier), 0.0)
                scores[at] = 1.0
            self._lca_scores[held] = scores
        return scores

    def network_aware(self, task: Task, subjob: SubJob, nodes: Index, exact: bool = False) -> Scores | None:
        """Node scores of a task with a network topology over candidate node rows `nodes`, unscaled. Unless
        `exact`, None where every candidate scores the same (no HyperNode held yet; all under one lowest-tier
        HyperNode), which orders nothing."""
        if not task.job_hypernode:
            return np.zeros(len(nodes)) if exact else None
        leaf = self.topo.index.leaf_of[nodes]
        if not exact and len(leaf) and np.logical_and.reduce(leaf == leaf[0]):
            return None
        scores = self.lca_scores(task.job_hypernode)[leaf]  # leaf -1 reads the extra 0 at the end
        if len(scores) > 1:
            tied = (scores == np.maximum.reduce(scores)).nonzero()[0]
            if len(tied) > 1:
                scores[tied] += self._shares(subjob)[leaf[tied]]
        return scores

    def tier_weights(self) -> npt.NDArray[np.float64]:
        if self._tier_weights is None:
            self._tier_weights = np.array([_power(self.fading, t - 1) for t in self.topo.index.tier_range])
        return self._tier_weights

    def normal(self, task: Task) -> Scores:
        """Node scores of a task without a network topology over every node, unscaled. Each request keeps its
        HyperNode binpack and refreshes only the HyperNodes whose use moved since it last looked (`changed`)."""
        self.settle()
        index = self.topo.index
        weights = self.tier_weights()
        total = weights.sum()
        if total <= 0 or not np.isfinite(total):  # fading 0 with a tier below 1: Volcano's NaN, no order
            return np.zeros(len(index.path_of))
        key = task.resreq.tobytes()
        entry = self._normal.get(key)
        if entry is None:
            dims = (task.resreq >= TOLERANCE) & (self.weights > 0)
            per_hypernode = np.ones(len(index.names) + 1)  # the extra entry: no HyperNode at that tier, full score
            per_hypernode[:-1] = self.binpack(task.resreq, dims, None)
            entry = self._normal[key] = _NormalClass(dims, per_hypernode, len(self.changed))
        elif entry.seen < len(self.changed):
            moved = sorted(set(self.changed[entry.seen:]))
            entry.seen = len(self.changed)
            if len(moved) <= SCALAR_MAX:  # a placement or two: plain floats beat numpy's per-call cost
                request = task.resreq.tolist()
                terms = [(int(d), float(self.weights[d])) for d in np.flatnonzero(entry.dims)]
                for i in moved:
                    entry.per_hypernode[i] = self._binpack_one(request, terms, i)
            else:
                rows = np.array(moved, dtype=np.intp)
                entry.per_hypernode[rows] = self.binpack(task.resreq, entry.dims, rows)
        per_path = entry.per_hypernode[index.path_at_tier] @ weights / total
        return per_path[index.path_of]


def _power(base: float, exponent: int) -> float:
    """Go's math.Pow where Python's raises: 0 to a negative power is +Inf."""
    return float("inf") if base == 0 and exponent < 0 else base**exponent


def weight_vector(dims_index: Mapping[str, int], weights: Iterable[tuple[str, int]]) -> npt.NDArray[np.float64]:
    out = np.zeros(len(dims_index))
    for name, weight in weights:
        d = dims_index.get(name)
        if d is not None:
            out[d] = float(weight)
    return out


__all__ = ["MAX_NODE_SCORE", "Scales", "weight_vector"]
