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


class PermitEvictions:
    """The UnifiedEvictableFn gangpreempt_test.go / gangreclaim_test.go register as `test-preempt` and
    `test-reclaim`: every candidate may go (`candidates, Permit`), so a row shows the action's own filters."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.add_evictable(lambda _ctx, candidates: candidates)

    def on_session_close(self, ssn: SessionView) -> None:
        return None


class FixedGradients:
    """The gradients gangpreempt_test.go / gangreclaim_test.go hand PickDomainsFromGradients: HyperNodeGradientForJob
    answers `gradients` (names joined by "," within a gradient, gradients by ";"; empty: none) whatever it is asked."""

    name = "test-gradients"

    def __init__(self, gradients: str) -> None:
        self.gradients = [[n for n in g.split(",") if n] for g in gradients.split(";")] if gradients else []

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.add_hypernode_gradient_for_job(lambda _job, _root, _purpose: [list(g) for g in self.gradients])

    def on_session_close(self, ssn: SessionView) -> None:
        return None


def _fixed_gradients(arguments: Arguments) -> PluginBuilder:
    return partial(FixedGradients, text(arguments, "gradients", ""))


def _permit_evictions(name: str, arguments: Arguments) -> PluginBuilder:
    return partial(PermitEvictions, name)


def _rejecter(arguments: Arguments) -> PluginBuilder:
    return partial(Rejecter, text(arguments, "rejectJob", ""))


def _device_fit(arguments: Arguments) -> PluginBuilder:
    return DeviceFitAfterEviction


FAKE_PLUGINS: Final[dict[str, PluginLoader]] = {
    Rejecter.name: _rejecter,
    DeviceFitAfterEviction.name: _device_fit,
    FixedGradients.name: _fixed_gradients,
    "test-preempt": partial(_permit_evictions, "test-preempt"),
    "test-reclaim": partial(_permit_evictions, "test-reclaim"),
}
