"""A filter part whose verdict for every node is a code: 0 where the pod may go, else the index of its first
failing rule among the part's reasons (kube-scheduler's Filter returns the first failure, in its own words).

The codes of one task are computed over all nodes at once and kept until the placed pods change, so the fit error's
walk over the nodes (`explain`) and preempt's one-node checks reuse them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from extender.engine.interface import Index, Mask
from extender.engine.model import Node, Task
from extender.engine.podindex import PodCounts

Codes = npt.NDArray[np.int8]


class CodedFilter:
    reasons: tuple[str, ...] = ("",)

    def __init__(self, counts: PodCounts) -> None:
        self.counts = counts
        self._last: tuple[str, int, Codes] | None = None

    def concerns(self, task: Task) -> bool:
        raise NotImplementedError

    def compute(self, task: Task) -> Codes:
        raise NotImplementedError

    def codes(self, task: Task) -> Codes:
        """Per node: 0 where the task may go, else the index of its first failing rule in `reasons`."""
        last = self._last
        if last is not None and last[0] == task.uid and last[1] == self.counts.version:
            return last[2]
        codes = self.compute(task)
        self._last = (task.uid, self.counts.version, codes)
        return codes

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None:
        if not self.concerns(task):
            return None
        return self.codes(task)[idx] == 0

    def explain(self, task: Task, node: Node) -> list[str]:
        if not self.concerns(task):
            return []
        code = int(self.codes(task)[node.idx])
        return [self.reasons[code]] if code else []


__all__ = ["CodedFilter", "Codes"]
