"""A filter part made of rules, each refusing some nodes with a reason: a node passes when no rule refuses it, and
is explained by the first rule that does (kube-scheduler's Filter returns the first failure, in its own words).

A task's rules are computed over all nodes at once and kept until the placed pods change, so placement's mask, the
fit error's walk over the nodes (`explain`) and preempt's one-node checks reuse them; the per-node codes are built
only when an explanation asks.

A node whose first refusal is one of `unresolvable` (kube-scheduler's UnschedulableAndUnresolvable: required pod
affinity, a node without a spread constraint's key) is one no eviction can open: preempt and reclaim look for
victims elsewhere (Volcano's `PredicateForPreemptAction`; reclaim pipelines once the resources fit, without asking
the predicates again), and a task every node refuses so is UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from extender.engine.interface import Index, Mask
from extender.engine.model import Node, Task
from extender.engine.podindex import PodCounts

Codes = npt.NDArray[np.int8]
Rule = tuple[int, Mask]  # (index of the reason in `reasons`, the nodes the rule refuses)


@dataclass(slots=True)
class _Verdict:
    uid: str
    version: int
    rules: list[Rule]
    allowed: Mask
    codes: Codes | None = field(default=None)


class CodedFilter:
    reasons: tuple[str, ...] = ("",)
    unresolvable: frozenset[int] = frozenset()  # reasons kube-scheduler gives as UnschedulableAndUnresolvable

    def __init__(self, counts: PodCounts, size: int) -> None:
        self.counts = counts
        self.size = size
        self._last: _Verdict | None = None

    def concerns(self, task: Task) -> bool:
        raise NotImplementedError

    def rules(self, task: Task) -> list[Rule]:
        """The task's rules in kube-scheduler's order."""
        raise NotImplementedError

    def _verdict(self, task: Task) -> _Verdict:
        last = self._last
        if last is not None and last.uid == task.uid and last.version == self.counts.version:
            return last
        rules = self.rules(task)
        if not rules:
            allowed = np.ones(self.size, dtype=bool)
        else:
            refused = rules[0][1].copy() if len(rules) > 1 else rules[0][1]
            for _, more in rules[1:]:
                refused |= more
            allowed = ~refused
        self._last = _Verdict(task.uid, self.counts.version, rules, allowed)
        return self._last

    def codes(self, task: Task) -> Codes:
        """Per node: 0 where the task may go, else the index of its first failing rule in `reasons`."""
        verdict = self._verdict(task)
        if verdict.codes is None:
            codes = np.zeros(self.size, dtype=np.int8)
            for code, refused in verdict.rules:
                codes[(codes == 0) & refused] = code
            verdict.codes = codes
        return verdict.codes

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None:
        if not self.concerns(task):
            return None
        allowed = self._verdict(task).allowed
        # Callers pass sorted, distinct rows: as many as there are nodes means every node.
        return allowed if len(idx) == self.size else allowed[idx]

    def unresolvable_mask(self, task: Task, idx: Index) -> Mask | None:
        """The nodes whose first refusal (kube-scheduler's Filter returns it) no eviction fixes."""
        if not self.unresolvable or not self.concerns(task):
            return None
        refused = np.isin(self.codes(task), tuple(self.unresolvable))
        return refused if len(idx) == self.size else refused[idx]

    def explain(self, task: Task, node: Node) -> list[str]:
        if not self.concerns(task):
            return []
        code = int(self.codes(task)[node.idx])
        return [self.reasons[code]] if code else []


__all__ = ["CodedFilter", "Codes", "Rule"]
