"""reclaim action: Volcano's `actions/reclaim/reclaim_test.go` case plus proportion fair-share reclaim.

Confs write every flag that matters: Volcano's unit tests leave unlisted flags off, our conf files default them on.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.unit.extender.engine.builders import run

# Volcano's TestReclaim tiers: conformance, gang, proportion, each with Reclaimable on. Preemptive and JobStarving
# are off there, which upstream reads as "no function": every queue may reclaim, no job starves… except that the
# old action did not ask. Today's action asks both, so they are switched on here (gang starving, proportion
# preemptive).
PROPORTION_CONF = """
actions: reclaim
tiers:
- plugins:
  - {name: conformance, enableReclaimable: true, enablePreemptable: false}
  - {name: gang, enableReclaimable: true, enableJobStarving: true, enableJobPipelined: true,
     enablePreemptable: false, enableJobOrder: false, enableJobReady: false}
  - {name: proportion, enableReclaimable: true, enablePreemptive: true, enableQueueOrder: true,
     enabledOverused: true, enabledAllocatable: true, enableJobEnqueued: false}
  - {name: predicates, enablePredicate: true}
"""

PRIORITY_CLASSES = [{"name": "low-priority", "value": 10}, {"name": "high-priority", "value": 100000}]


def _scenario(**parts: Any) -> dict[str, Any]:
    return {"conf": yaml.safe_load(PROPORTION_CONF), "priorityClasses": PRIORITY_CLASSES, **parts}


def _pod(name: str, group: str, cpu: str, node: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "group": group, "req": {"cpu": cpu, "memory": f"{cpu}G"}, **extra}
    if node:
        spec.update(node=node, phase="Running")
    return spec


def test_volcano_two_queues_one_overusing_should_reclaim() -> None:
    scenario = _scenario(
        nodes=[{"name": "n1", "alloc": {"cpu": "3", "memory": "3Gi"}}],
        queues=[{"name": "q1"}, {"name": "q2"}],
        podgroups=[
            {"name": "c1/pg1", "queue": "q1", "priorityClassName": "low-priority"},
            {"name": "c1/pg2", "queue": "q2", "priorityClassName": "high-priority", "min": 1},
        ],
        pods=[
            _pod("c1/preemptee1", "pg1", "1", "n1", annotations={"volcano.sh/preemptable": "true"}),
            _pod("c1/preemptee2", "pg1", "1", "n1"),
            _pod("c1/preemptee3", "pg1", "1", "n1"),
            _pod("c1/preemptor1", "pg2", "1"),
        ],
    )
    result = run(scenario)
    assert len(result.evictions) == 1
    assert result.pipelined == {"c1/preemptor1": "n1"}


def _two_queues(**overrides: Any) -> dict[str, Any]:
    """Weights 1:1 on 4 cpu. q1 runs 4 one-cpu tasks (deserved 2), q2 waits with 2 one-cpu tasks."""
    base = _scenario(
        nodes=[{"name": "n1", "alloc": {"cpu": "4", "memory": "4G"}}],
        queues=[{"name": "q1"}, {"name": "q2"}],
        podgroups=[
            {"name": "ns/busy", "queue": "q1", "min": 1},
            {"name": "ns/hungry", "queue": "q2", "min": 2},
        ],
        pods=[
            *[_pod(f"ns/busy-t-{i}", "busy", "1", "n1") for i in range(4)],
            _pod("ns/hungry-t-0", "hungry", "1"),
            _pod("ns/hungry-t-1", "hungry", "1"),
        ],
    )
    base.update(overrides)
    return base


def test_overused_queue_loses_tasks_down_to_deserved() -> None:
    result = run(_two_queues())
    # q1 holds 4 of the 2 cpu it deserves: two tasks go, highest replica index first.
    assert sorted(result.evictions) == ["ns/busy-t-2", "ns/busy-t-3"]
    assert result.pipelined == {"ns/hungry-t-0": "n1", "ns/hungry-t-1": "n1"}
    assert result.to_json()["queues"]["q1"]["deserved"]["cpu"] == "2"
    assert result.to_json()["queues"]["q2"]["deserved"]["cpu"] == "2"


def test_gang_starving_reclaims_only_for_min_member() -> None:
    scenario = _two_queues()
    scenario["podgroups"][1]["min"] = 1
    result = run(scenario)
    # gang's JobStarving: once minMember tasks are pipelined the job no longer starves.
    assert result.evictions == ["ns/busy-t-3"]
    assert result.pipelined == {"ns/hungry-t-0": "n1"}


def test_reclaim_stops_at_deserved() -> None:
    scenario = _two_queues()
    scenario["podgroups"][1]["min"] = 1
    scenario["pods"] += [_pod(f"ns/hungry-t-{i}", "hungry", "1") for i in (2, 3)]
    # priority's JobStarving (every task wanted) instead of gang's, so the job keeps reclaiming...
    plugins = scenario["conf"]["tiers"][0]["plugins"]
    plugins[1]["enableJobStarving"] = False
    plugins.append({"name": "priority", "enableJobStarving": True, "enablePreemptable": False})
    result = run(scenario)
    # ...but q2 asks for 4 and deserves 2: Preemptive stops it there, so q1 keeps two tasks.
    assert sorted(result.evictions) == ["ns/busy-t-2", "ns/busy-t-3"]
    assert len(result.pipelined) == 2


def test_non_reclaimable_queue_is_never_a_victim() -> None:
    scenario = _two_queues()
    scenario["queues"][0]["reclaimable"] = False
    result = run(scenario)
    assert result.evictions == []
    assert result.pipelined == {}


def test_non_preemptable_tasks_are_not_reclaimed() -> None:
    scenario = _two_queues()
    for pod in scenario["pods"]:
        if pod["name"] in ("ns/busy-t-2", "ns/busy-t-3"):
            pod["annotations"] = {"volcano.sh/preemptable": "false"}
    result = run(scenario)
    assert sorted(result.evictions) == ["ns/busy-t-0", "ns/busy-t-1"]


def test_queue_at_deserved_is_not_reclaimed_from() -> None:
    scenario = _two_queues()
    scenario["pods"] = [p for p in scenario["pods"] if p["name"] not in ("ns/busy-t-2", "ns/busy-t-3")]
    scenario["pods"] += [_pod("ns/hungry-t-2", "hungry", "1", "n1"), _pod("ns/hungry-t-3", "hungry", "1", "n1")]
    scenario["podgroups"][1]["min"] = 3
    # Both queues hold exactly their 2 cpu; q2 still starves for its gang but q1 is not above deserved.
    result = run(scenario)
    assert result.evictions == []


def test_gang_partial_reclaim_is_discarded() -> None:
    scenario = _two_queues()
    scenario["podgroups"][1]["min"] = 3
    scenario["pods"].append(_pod("ns/hungry-t-2", "hungry", "1"))
    # q2 may reclaim only 2 cpu (its deserved), so its gang of 3 cannot be pipelined: nothing is evicted.
    result = run(scenario)
    assert result.evictions == []
    assert result.pipelined == {}


def test_same_queue_is_not_reclaimed() -> None:
    scenario = _two_queues()
    scenario["podgroups"][1]["queue"] = "q1"
    assert run(scenario).evictions == []


def test_gang_min_member_protects_reclaimees() -> None:
    scenario = _two_queues()
    scenario["podgroups"][0]["min"] = 3  # q1's job may lose only one task
    scenario["podgroups"][1]["min"] = 1
    result = run(scenario)
    assert result.evictions == ["ns/busy-t-3"]
    assert result.pipelined == {"ns/hungry-t-0": "n1"}


def test_preemption_policy_never_is_respected() -> None:
    from extender.engine.conf import parse_conf
    from extender.engine.run import registry, run_session
    from extender.engine.snapshot import build_snapshot
    from tests.unit.extender.engine.builders import documents

    scenario = _two_queues()
    docs = documents(scenario)
    for doc in docs:
        if doc["kind"] == "Pod" and doc["metadata"]["name"].startswith("hungry"):
            doc["spec"]["preemptionPolicy"] = "Never"
    result = run_session(build_snapshot(docs), parse_conf(scenario["conf"], registry()))
    assert result.evictions == []
