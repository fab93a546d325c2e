"""What explain reads a session through (`interface.ExplainView`, `SessionProbe`): trial placements leave the session
as they found it, and a probe is told of exactly the votes the session takes, without changing what it decides."""

from __future__ import annotations

from typing import Any

import numpy as np

from extender.engine.interface import ExplainView
from extender.engine.model import Job, Queue, Task, TaskStatus
from extender.engine.run import open_view, parse_scheduler_conf, run_session
from extender.engine.snapshot import Snapshot, build_snapshot
from tests.unit.extender.engine.builders import documents

CONF = parse_scheduler_conf(None)


def _snapshot() -> Snapshot:
    """Queue q1 (capability 4 cpu) with a 3-pod gang it admits and a 3-pod gang it cannot also hold; an admitted
    job in q2 whose pods fill the one node it fits."""
    scenario: dict[str, Any] = {
        "nodes": [{"name": "n1", "alloc": {"cpu": "4", "memory": "8Gi"}},
                  {"name": "n2", "alloc": {"cpu": "4", "memory": "8Gi"}}],
        "queues": [{"name": "q1", "capability": {"cpu": "4"}}, {"name": "q2"}],
        "podgroups": [
            {"name": "u/a", "queue": "q1", "min": 3, "phase": "Pending", "minResources": {"cpu": "3"}},
            {"name": "u/b", "queue": "q1", "min": 3, "phase": "Pending", "minResources": {"cpu": "3"}},
            {"name": "u/c", "queue": "q2", "min": 2, "phase": "Inqueue"},
        ],
        "pods": [{"name": f"u/c-{i}", "group": "c", "req": {"cpu": "3"}} for i in range(3)],
    }
    return build_snapshot(documents(scenario))


def test_a_trial_is_undone_whole() -> None:
    ssn = open_view(_snapshot(), CONF)
    job = ssn.jobs["u/c"]
    state = ssn.arrays.state.copy()
    trial = ssn.trial()
    placed = []
    for task in sorted(job.pending_tasks(), key=lambda t: t.uid):
        choice = ssn.choose(task)
        if choice is None:
            continue
        node, idle = choice
        (trial.allocate if idle else trial.pipeline)(task, node)
        placed.append(task)
    assert len(placed) == 2  # 3 cpu each on two 4-cpu nodes: the third finds no node
    assert all(t.status is TaskStatus.ALLOCATED for t in placed)
    assert not np.array_equal(ssn.arrays.state, state)
    trial.discard()
    assert np.array_equal(ssn.arrays.state, state)
    assert all(t.status is TaskStatus.PENDING and t.node is None for t in job.tasks.values())
    assert all(not node.tasks for node in ssn.nodes)


class _Tally:
    """A SessionProbe that counts what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.asked: set[str] = set()

    def opened(self, ssn: ExplainView) -> None:
        self.calls.append(("opened", ""))

    def enqueue_asked(self, job: Job) -> None:
        self.asked.add(job.uid)

    def enqueue_answered(self, job: Job, admitted: bool) -> None:
        assert job.uid in self.asked  # told before and after, in that order
        self.calls.append(("enqueue", f"{job.uid}={admitted}"))

    def queue_overused(self, queue: Queue) -> None:
        self.calls.append(("overused", queue.name))

    def task_refused(self, queue: Queue, task: Task) -> None:
        self.calls.append(("refused", task.uid))

    def closing(self, ssn: ExplainView) -> None:
        self.calls.append(("closing", ""))


def test_a_probe_is_told_of_the_votes_and_changes_no_decision() -> None:
    plain = run_session(_snapshot(), CONF)
    tally = _Tally()
    probed = run_session(_snapshot(), CONF, probe=tally)
    assert probed.to_json() == plain.to_json()
    assert tally.calls[0] == ("opened", "") and tally.calls[-1] == ("closing", "")
    enqueue = sorted(detail for kind, detail in tally.calls if kind == "enqueue")
    # q1 admits one of its two 3-cpu gangs within its 4-cpu capability, and only one.
    assert sorted(d.split("=")[1] for d in enqueue) == ["False", "True"]
    assert {d.split("=")[0] for d in enqueue} == {"u/a", "u/b"}


def test_plugins_are_found_by_name() -> None:
    ssn = open_view(_snapshot(), CONF)
    gang = ssn.plugin("gang")
    assert gang is not None and gang.name == "gang"
    assert ssn.plugin("no-such-plugin") is None
