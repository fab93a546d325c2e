"""The lab GPU platform (examples/lab-platform/): its queue tree and capacity conf in one engine session each —
a lab borrows idle GPUs up to what the other lab's guarantee leaves, gives them back by reclaim when the owner
lab submits (whole gangs, the borrower's user above deserved first), and priority orders jobs within a lab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from extender.engine.results import Decisions
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import node, pod, podgroup

LAB = Path(__file__).resolve().parents[4] / "examples" / "lab-platform"
GPU = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}


def _cluster() -> list[dict[str, Any]]:
    docs = [node({"name": f"gpu-{i}", "alloc": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}})
            for i in range(4)]
    return docs + list(yaml.safe_load_all((LAB / "queues.yaml").read_text()))


def _gang(docs: list[dict[str, Any]], key: str, queue: str, on: str | None = None, prio: str | None = None,
          phase: str = "Inqueue") -> None:
    ns, name = key.split("/")
    spec: dict[str, Any] = {"name": key, "queue": queue, "min": 2, "phase": phase}
    if prio:
        spec["priorityClassName"] = prio
    docs.append(podgroup(spec))
    for i in range(2):
        member: dict[str, Any] = {"name": f"{ns}/{name}-w-{i}", "group": name, "req": GPU}
        if on:
            member.update(node=on, phase="Running")
        docs.append(pod(member))


def _run(docs: list[dict[str, Any]]) -> Decisions:
    conf = parse_scheduler_conf((LAB / "scheduler-conf.yaml").read_text())
    assert conf.warnings == ()
    return run_session(build_snapshot(docs), conf)


def test_a_lab_borrows_every_idle_gpu_within_its_users_capabilities() -> None:
    docs = _cluster()
    for key, queue in (("b/c1", "lab-b-carol"), ("b/c2", "lab-b-carol"), ("b/c3", "lab-b-carol"),
                       ("b/d1", "lab-b-dave"), ("b/d2", "lab-b-dave"), ("b/d3", "lab-b-dave")):
        _gang(docs, key, queue)
    result = _run(docs)
    bound = {k.split("-w-")[0] for k in result.binds}
    # In a queue tree root has no limit (Volcano), so lab-b may take all 8 GPUs while lab-a is idle; each user
    # queue stops at its capability of 4, so c3 and d3 wait.
    assert len(result.binds) == 8
    assert bound == {"b/c1", "b/c2", "b/d1", "b/d2"}
    assert result.to_json()["queues"]["lab-b"]["allocated"]["nvidia.com/gpu"] == "8"


def test_the_owner_lab_takes_its_share_back_by_reclaim_whole_gangs_from_users_above_deserved() -> None:
    docs = _cluster()
    for i, (key, queue) in enumerate((("b/c1", "lab-b-carol"), ("b/c2", "lab-b-carol"), ("b/d1", "lab-b-dave"),
                                      ("b/d2", "lab-b-dave"))):
        _gang(docs, key, queue, on=f"gpu-{i}", phase="Running")
    _gang(docs, "a/a1", "lab-a-alice")
    _gang(docs, "a/b1", "lab-a-bob")
    result = _run(docs)
    # Nothing is free: both of lab-a's gangs reclaim, each evicting one whole lab-b gang (carol and dave each
    # hold 4 GPUs against 2 deserved) and waiting on its node (pipelined) while the victims terminate.
    assert result.binds == {}
    evicted = {k.split("-w-")[0] for k in result.evictions}
    assert len(result.evictions) == 4 and len(evicted) == 2, result.evictions
    assert len(result.pipelined) == 4
    home = {"b/c1": "gpu-0", "b/c2": "gpu-1", "b/d1": "gpu-2", "b/d2": "gpu-3"}
    assert set(result.pipelined.values()) == {home[g] for g in evicted}
    assert {result.pipelined["a/a1-w-0"]} == {result.pipelined["a/a1-w-1"]}
    assert {result.pipelined["a/b1-w-0"]} == {result.pipelined["a/b1-w-1"]}


def test_a_lab_within_its_deserved_share_loses_nothing() -> None:
    docs = _cluster()
    for i, (key, queue) in enumerate((("b/c1", "lab-b-carol"), ("b/d1", "lab-b-dave"), ("a/a1", "lab-a-alice"),
                                      ("a/b1", "lab-a-bob"))):
        _gang(docs, key, queue, on=f"gpu-{i}", phase="Running")
    _gang(docs, "a/b2", "lab-a-bob")
    assert _run(docs).evictions == []


def test_priority_within_a_lab_deadline_run_first_and_preempts_an_exploratory_one() -> None:
    docs = _cluster()
    # bob's queue (capability 4 GPUs) holds an exploratory run; a deadline run and another exploratory arrive.
    _gang(docs, "a/explore1", "lab-a-bob", on="gpu-0", prio="lab-exploratory", phase="Running")
    _gang(docs, "a/explore2", "lab-a-bob", prio="lab-exploratory")
    _gang(docs, "a/deadline", "lab-a-bob", prio="lab-deadline")
    _gang(docs, "b/c1", "lab-b-carol", on="gpu-1", phase="Running")
    _gang(docs, "b/d1", "lab-b-dave", on="gpu-2", phase="Running")
    result = _run(docs)
    # Room for one more gang in bob's queue: the deadline run gets it, the exploratory one waits.
    assert {k.split("-w-")[0] for k in result.binds} == {"a/deadline"}
    assert result.evictions == []
