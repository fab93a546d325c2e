"""Parked gangs through the service's sessions: a gang that cannot fit is judged once and then left out until an
event says its answer may have changed; a session in which nothing changed does not run the engine at all, yet its
outcome still gives filter each gang's reason and the paced Unschedulable events still go out."""

from __future__ import annotations

from typing import Any

import pytest

import extender.service.session as service_session
from extender.engine.run import parse_scheduler_conf
from extender.service.pacing import EVENT_REPEAT_S, Pacer
from extender.service.plan import overlay
from extender.service.runner import watch
from extender.service.session import Outcome, run
from extender.service.state import ClusterState
from tests.service.extender_state import cluster_state, feed
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


def _cluster() -> ClusterState:
    docs: list[dict[str, Any]] = [queue({"name": "default"}), queue({"name": "q2"})]
    for i in range(2):
        docs.append(node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "1"}}))
        docs.append(pod({"name": f"ns/run-{i}", "req": GPU, "node": f"n{i}", "phase": "Running"}))
    for g in range(3):
        docs.append(podgroup({"name": f"ns/wait-{g}", "min": 2, "phase": "Inqueue"}))
        docs += [pod({"name": f"ns/wait-{g}-{t}", "group": f"wait-{g}", "req": GPU}) for t in range(2)]
    return cluster_state(docs)


class Sessions:
    """The service's session (`run`) over a cluster state with parking, the engine runs counted."""

    def __init__(self, state: ClusterState, monkeypatch: pytest.MonkeyPatch) -> None:
        self.state, self.parking, self.pacer, self.now = state, watch(state), Pacer(), 1000.0
        self.conf = parse_scheduler_conf(None)
        self.engine_runs: list[frozenset[str]] = []
        real = service_session.run_session

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.engine_runs.append(kwargs.get("parked", frozenset()))
            return real(*args, **kwargs)

        monkeypatch.setattr(service_session, "run_session", counted)

    def __call__(self, advance_s: float = 1.0) -> Outcome:
        self.now += advance_s
        snap = overlay(self.state.copy(), {})
        return run(snap, self.conf, {}, self.state.store("PodGroup"), self.state.store("Queue"), self.pacer,
                   now=self.now, parking=self.parking, base=self.state.snapshot)


def _land(state: ClusterState, outcome: Outcome) -> None:
    """The status writes land (the watch brings the PodGroups back with them)."""
    for kind, key, status in outcome.status_writes:
        if kind == "PodGroup":
            stored = dict(state.store("PodGroup")[key])
            stored["status"] = status
            stored["metadata"] = {**stored["metadata"], "resourceVersion": str(len(key) + len(str(status)))}
            feed(state, stored)


def test_a_gang_that_cannot_fit_is_judged_once_until_something_could_change_its_answer(monkeypatch):
    state = _cluster()
    sessions = Sessions(state, monkeypatch)
    first = sessions()
    assert set(sessions.parking.parked) == {"ns/wait-0", "ns/wait-1", "ns/wait-2"}
    assert {w.key for w in first.status_writes if w.kind == "PodGroup"} == set(sessions.parking.parked)
    _land(state, first)

    second = sessions()  # the conditions landed: one more session, leaving the three out
    assert sessions.engine_runs[-1] == frozenset(sessions.parking.parked) and not second.new_plans
    assert set(second.reasons) == {"ns/wait-0", "ns/wait-1", "ns/wait-2"}, "filter still has each gang's reason"
    assert not [w for w in second.status_writes if w.kind == "PodGroup"]

    runs = len(sessions.engine_runs)
    third = sessions(EVENT_REPEAT_S + 1)  # nothing changed at all: the engine is not asked again
    assert len(sessions.engine_runs) == runs
    assert third.reasons == second.reasons and not third.status_writes and not third.new_plans
    assert {e.key for e in third.events if e.reason == "Unschedulable"} == set(second.reasons), (
        "the paced repeat of each waiting gang's event still goes out")

    feed(state, podgroup({"name": "ns/other", "min": 1, "queue": "q2", "phase": "Inqueue"}))
    feed(state, pod({"name": "ns/other-0", "group": "other", "req": {"cpu": "1"}}))
    assert not sessions.parking.parked, "proportion re-divides every queue's share: every parked gang is judged again"
    fourth = sessions()  # a gang of another queue arrives: judged beside the three, which wait and park again
    assert len(sessions.engine_runs) == runs + 1 and sessions.engine_runs[-1] == frozenset()
    assert set(fourth.new_plans) == {"ns/other"}
    assert set(sessions.parking.parked) == {"ns/wait-0", "ns/wait-1", "ns/wait-2"}

    done = pod({"name": "ns/run-0", "req": GPU, "node": "n0", "phase": "Succeeded"})
    feed(state, done)  # room came free: every parked gang is judged again
    assert not sessions.parking.parked
    sessions()
    assert sessions.engine_runs[-1] == frozenset()
