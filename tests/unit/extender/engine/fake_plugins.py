"""Test-only plugins that Volcano's scheduler unit tests define beside their cases, offered to scenario rows only.

They join the engine's own plugins in `builders.registry_with_fakes()`, never the engine's registry, so no conf
outside the tests can name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

import numpy as np

from extender.engine.arguments import Arguments, text
from extender.engine.interface import PERMIT, REJECT, Index, Mask, PluginBuilder, PluginLoader, SessionView, Vote
from extender.engine.model import Job, Node, Task, TaskStatus


class Rejecter:
    """Volcano's `uthelper.RejecterPlugin`: JobEnqueueable rejects the PodGroup named `reject_job`, permits the
    rest (a co-tier rejection must leave no reservation behind)."""

    name = "test-rejecter"

    def __init__(self, reject_job: str) -> None:
        self.reject_job = reject_job

    def vote(self, job: Job) -> Vote:
        return REJECT if job.name == self.reject_job else PERMIT

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.add_job_enqueueable(self.vote)

    def on_session_close(self, ssn: SessionView) -> None:
        return None


class DeviceFitAfterEviction:
    """Volcano's `deviceFitAfterEvictionPlugin` (preempt_test.go): a predicate standing for device capacity the
    resource fit does not see. The task named `preemptor` fits no node that holds a task named `preemptee` which is
    not being released, whatever the node's idle resources."""

    name = "device-fit-after-eviction"

    def __init__(self) -> None:
        self.nodes: Sequence[Node] = []

    @staticmethod
    def _fits(task: Task, node: Node) -> bool:
        if task.name != "preemptor":
            return True
        return not any(t.name == "preemptee" and t.status is not TaskStatus.RELEASING for t in node.tasks.values())

    def static_mask(self, task: Task, idx: Index) -> Mask:
        return np.ones(len(idx), dtype=bool)

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None:
        return np.fromiter((self._fits(task, self.nodes[int(i)]) for i in idx), dtype=bool, count=len(idx))

    def unresolvable_mask(self, task: Task, idx: Index) -> Mask | None:
        return None

    def explain(self, task: Task, node: Node) -> list[str]:
        return [] if self._fits(task, node) else ["hidden device capacity is occupied"]

    def on_session_open(self, ssn: SessionView) -> None:
        self.nodes = ssn.nodes
        ssn.add_predicate(self)

    def on_session_close(self, ssn: SessionView) -> None:
        return None


def _rejecter(arguments: Arguments) -> PluginBuilder:
    return partial(Rejecter, text(arguments, "rejectJob", ""))


def _device_fit(arguments: Arguments) -> PluginBuilder:
    return DeviceFitAfterEviction


FAKE_PLUGINS: Final[dict[str, PluginLoader]] = {
    Rejecter.name: _rejecter,
    DeviceFitAfterEviction.name: _device_fit,
}
