"""nodeorder: kube-scheduler's score plugins, weighted (Volcano's `plugins/nodeorder/nodeorder.go`).

Row-local scores (LeastAllocated, MostAllocated, BalancedAllocation) are integers as upstream computes them and
depend only on the node's row, so the session caches them per task class. NodeAffinity (preferred terms) and
TaintToleration (PreferNoSchedule) are normalised over the candidate nodes, so they are computed at pick time.
Arguments (defaults): `leastrequested.weight` 1, `mostrequested.weight` 0, `nodeaffinity.weight` 2,
`balancedresource.weight` 1, `tainttoleration.weight` 3. InterPodAffinity, PodTopologySpread and ImageLocality are
not evaluated (their weights are accepted and have no effect).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from extender.engine.framework import Fn, float_arg, register_plugin
from extender.engine.model import Node, Task
from extender.engine.selectors import node_selector_terms_match, tolerates
from extender.engine.session import Index, Session
from lapilli.resources.units import CPU, GPU, MEMORY

# kube-scheduler counts a container without requests as 100m CPU / 200Mi memory when spreading load.
DEFAULT_MILLI_CPU: Final = 100.0
DEFAULT_MEMORY: Final = 200.0 * 1024 * 1024
MAX_SCORE: Final = 100.0

Scores = npt.NDArray[np.float64]


class NodeOrderScorer:
    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.least = float_arg(arguments, "leastrequested.weight", 1)
        self.most = float_arg(arguments, "mostrequested.weight", 0)
        self.affinity = float_arg(arguments, "nodeaffinity.weight", 2)
        self.balanced = float_arg(arguments, "balancedresource.weight", 1)
        self.taint = float_arg(arguments, "tainttoleration.weight", 3)
        self.ssn: Session | None = None
        # Raw NodeAffinity / TaintToleration counts over all nodes, per pod template (predicate key).
        self._raw_affinity: dict[str, Scores] = {}
        self._raw_taints: dict[str, Scores] = {}
        self._any_prefer_no_schedule = False

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self._raw_affinity.clear()
        self._raw_taints.clear()
        self._any_prefer_no_schedule = any(
            t.get("effect") == "PreferNoSchedule" for n in ssn.nodes for t in n.taints
        )

    def _requested(self, task: Task, idx: Index, dim: int, default: float) -> tuple[Scores, Scores]:
        assert self.ssn is not None
        arrays = self.ssn.arrays
        want = task.resreq[dim] if task.resreq[dim] > 0 else default
        return arrays.used[idx, dim] + want, arrays.allocatable[idx, dim]

    def score(self, task: Task, idx: Index) -> Scores:
        assert self.ssn is not None
        dims = self.ssn.dims
        total = np.zeros(len(idx))
        cpu_req, cpu_cap = self._requested(task, idx, dims.index[CPU], DEFAULT_MILLI_CPU)
        mem_req, mem_cap = self._requested(task, idx, dims.index[MEMORY], DEFAULT_MEMORY)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.least:
                total += self.least * _mean_int(_least(cpu_req, cpu_cap), _least(mem_req, mem_cap))
            if self.most:
                total += self.most * _mean_int(_most(cpu_req, cpu_cap), _most(mem_req, mem_cap))
            if self.balanced:
                fractions = [np.minimum(np.where(cpu_cap > 0, cpu_req / cpu_cap, 1.0), 1.0)]
                fractions.append(np.minimum(np.where(mem_cap > 0, mem_req / mem_cap, 1.0), 1.0))
                gpu = dims.index.get(GPU)
                if gpu is not None and task.resreq[gpu] > 0:
                    gpu_req, gpu_cap = self._requested(task, idx, gpu, 0.0)
                    fractions.append(np.minimum(np.where(gpu_cap > 0, gpu_req / gpu_cap, 1.0), 1.0))
                std = np.std(np.vstack(fractions), axis=0)
                total += self.balanced * np.floor((1.0 - std) * MAX_SCORE)
        return total

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        assert self.ssn is not None
        nodes = self.ssn.nodes
        extra: Scores | None = None
        preferred = ((task.spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        )
        if self.affinity and preferred:
            all_raw = self._raw_affinity.get(task.predicate_key)
            if all_raw is None:
                all_raw = np.array([_preferred(preferred, n) for n in nodes], dtype=float)
                self._raw_affinity[task.predicate_key] = all_raw
            raw = all_raw[idx]
            top = raw.max(initial=0.0)
            if top > 0:
                extra = self.affinity * np.floor(raw * MAX_SCORE / top)
        # Without PreferNoSchedule taints every node scores the same here, which cannot change the choice.
        if self.taint and self._any_prefer_no_schedule:
            all_raw = self._raw_taints.get(task.predicate_key)
            if all_raw is None:
                all_raw = np.array([_prefer_no_schedule(task, n) for n in nodes], dtype=float)
                self._raw_taints[task.predicate_key] = all_raw
            raw = all_raw[idx]
            top = raw.max(initial=0.0)
            taint_scores = np.full(len(idx), MAX_SCORE) if top == 0 else np.floor((top - raw) * MAX_SCORE / top)
            taint_scores = self.taint * taint_scores
            extra = taint_scores if extra is None else extra + taint_scores
        return extra


def _least(requested: Scores, capacity: Scores) -> Scores:
    out = np.floor((capacity - requested) * MAX_SCORE / capacity)
    return np.where((capacity <= 0) | (requested > capacity), 0.0, out)


def _most(requested: Scores, capacity: Scores) -> Scores:
    out = np.floor(requested * MAX_SCORE / capacity)
    return np.where((capacity <= 0) | (requested > capacity), 0.0, out)


def _mean_int(cpu: Scores, memory: Scores) -> Scores:
    return np.floor((cpu + memory) / 2)


def _preferred(terms: list[Mapping[str, Any]], node: Node) -> float:
    total = 0.0
    for term in terms:
        preference = term.get("preference") or {}
        if node_selector_terms_match([preference], node.labels, node.name):
            total += float(term.get("weight") or 0)
    return total


def _prefer_no_schedule(task: Task, node: Node) -> float:
    tolerations = [t for t in task.spec.get("tolerations") or [] if t.get("effect") in (None, "", "PreferNoSchedule")]
    return float(
        sum(1 for t in node.taints if t.get("effect") == "PreferNoSchedule" and not tolerates(tolerations, t))
    )


class NodeOrderPlugin:
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.scorer = NodeOrderScorer(arguments)

    def on_session_open(self, ssn: Session) -> None:
        self.scorer.open(ssn)
        ssn.add_fn(Fn.NODE_ORDER, self.scorer)

    def on_session_close(self, ssn: Session) -> None:
        self.scorer.ssn = None


register_plugin("nodeorder")(NodeOrderPlugin)
