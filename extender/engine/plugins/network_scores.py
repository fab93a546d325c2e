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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from extender.engine.hypernodes import Topology
from extender.engine.interface import Index, Scores
from extender.engine.model import SubJob, Task
from lapilli.resources.vector import TOLERANCE

MAX_NODE_SCORE = 100.0
Matrix = npt.NDArray[np.float64]


@dataclass(slots=True)
class Scales:
    """A session's HyperNode resources (Volcano's `hyperNodeResourceCache`: allocatable, idle and future idle as
    the session opened, used kept up to date by the plugin's event handler) and the resource weights."""

    topo: Topology
    row_of: Mapping[str, int]  # node name -> row
    weights: npt.NDArray[np.float64]  # per resource dimension; 0 where the plugin does not weigh it
    allocatable: Matrix
    used: Matrix
    idle: Matrix
    future_idle: Matrix
    global_weight: float
    fading: float
    min_tier: int
    max_tier: int
    _lca_scores: dict[str, Scores] = field(default_factory=dict)
    _tier_weights: npt.NDArray[np.float64] | None = None

    # ---- HyperNode binpack -------------------------------------------------------------------------------------
    def binpack(self, request: npt.NDArray[np.float64], dims: npt.NDArray[np.bool_], rows: Index) -> Scores:
        """The binpack of `request` over the resource dimensions `dims` in HyperNodes `rows` (indices), in [0, 1]."""
        weights = np.where(dims, self.weights, 0.0)
        total_weight = weights.sum()
        if total_weight <= 0:
            return np.zeros(len(rows))
        after = self.used[rows] + request
        alloc = self.allocatable[rows]
        over = ((after > alloc) & dims).any(axis=1)
        share = np.divide(after, alloc, out=np.zeros_like(after), where=alloc > 0)
        return np.where(over, 0.0, (share * weights).sum(axis=1) / total_weight)

    def subjob_request(self, subjob: SubJob) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """Σ of the sub-gang's tasks' requests over the resources each asks for (≥ 0.1) that carry a weight."""
        request = np.zeros(len(self.weights))
        dims = np.zeros(len(self.weights), dtype=bool)
        for task in subjob.tasks.values():
            asked = task.resreq >= TOLERANCE
            request += np.where(asked, task.resreq, 0.0)
            dims |= asked
        return request, dims & (self.weights > 0)

    def task_share(self, subjob: SubJob, names: Sequence[str]) -> dict[str, float]:
        """The share of the sub-gang's tasks placed in each of `names` (`scoreWithTaskNum`; 0 without tasks)."""
        counts = dict.fromkeys(names, 0)
        wanted = {self.topo.index.index[name]: name for name in names}
        for task in subjob.tasks.values():
            row = self.row_of.get(task.node) if task.node else None
            if row is None:
                continue
            for i in self.topo.holders(row).tolist():
                if i in wanted:
                    counts[wanted[i]] += 1
        size = len(subjob.tasks)
        return {name: counts[name] / size if size else 0.0 for name in names}

    def hypernode_order(self, subjob: SubJob, names: Sequence[str]) -> dict[str, float]:
        """`HyperNodeOrderFn`, scaled."""
        index = self.topo.index.index
        rows = np.array([index[n] for n in names], dtype=np.intp)
        request, dims = self.subjob_request(subjob)
        scores = dict(zip(names, self.binpack(request, dims, rows).tolist(), strict=True))
        best = max(scores.values(), default=0.0)
        tied = [n for n in names if scores[n] == best]
        if len(tied) > 1:
            for name, share in self.task_share(subjob, tied).items():
                scores[name] += share
        return {n: MAX_NODE_SCORE * self.global_weight * s for n, s in scores.items()}

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
            names = self.topo.index.names
            scores = np.zeros(len(names) + 1)
            for i, name in enumerate(names):
                if name == held:
                    scores[i] = 1.0
                    continue
                tier = self.topo.tier_of(self.topo.lca(name, held))
                scores[i] = 0.0 if tier is None else self.tier_score(tier)
            self._lca_scores[held] = scores
        return scores

    def network_aware(self, task: Task, subjob: SubJob, nodes: Index) -> Scores:
        """Node scores of a task with a network topology over candidate node rows `nodes`, unscaled."""
        if not task.job_hypernode:
            return np.zeros(len(nodes))
        leaf = self.topo.index.leaf_of[nodes]
        scores = self.lca_scores(task.job_hypernode)[leaf]  # leaf -1 reads the extra 0 at the end
        best = scores.max() if len(scores) else 0.0
        tied = np.flatnonzero(scores == best)
        if len(tied) > 1:
            names = self.topo.index.names
            leaves = sorted({int(i) for i in leaf[tied].tolist() if i >= 0})
            shares = self.task_share(subjob, [names[i] for i in leaves])
            bonus = np.zeros(len(names) + 1)
            for i in leaves:
                bonus[i] = shares[names[i]]
            scores = scores.copy()
            scores[tied] += bonus[leaf[tied]]
        return scores

    def tier_weights(self) -> npt.NDArray[np.float64]:
        if self._tier_weights is None:
            self._tier_weights = np.array([self.fading ** (t - 1) for t in self.topo.index.tier_range])
        return self._tier_weights

    def normal(self, task: Task, nodes: Index) -> Scores:
        """Node scores of a task without a network topology over node rows `nodes`, unscaled."""
        index = self.topo.index
        weights = self.tier_weights()
        total = weights.sum()
        if total <= 0:
            return np.zeros(len(nodes))
        dims = (task.resreq >= TOLERANCE) & (self.weights > 0)
        per_hypernode = np.ones(len(index.names) + 1)  # the extra entry: no HyperNode at that tier, full score
        per_hypernode[:-1] = self.binpack(task.resreq, dims, np.arange(len(index.names), dtype=np.intp))
        per_path = per_hypernode[index.path_at_tier] @ weights / total
        return per_path[index.path_of[nodes]]


def weight_vector(dims_index: Mapping[str, int], weights: Iterable[tuple[str, int]]) -> npt.NDArray[np.float64]:
    out = np.zeros(len(dims_index))
    for name, weight in weights:
        d = dims_index.get(name)
        if d is not None:
            out[d] = float(weight)
    return out


__all__ = ["MAX_NODE_SCORE", "Scales", "weight_vector"]
