"""preempt action: Volcano's `actions/preempt/preempt_test.go` cases plus priority, gang and preemptable rules.

Confs write every flag that matters: Volcano's unit tests leave unlisted flags off, our conf files default them on.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extender.engine.conf import parse_conf
from extender.engine.results import Decisions
from extender.engine.run import registry, run_session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents, run

# Volcano's TestPreempt tiers: conformance{Preemptable}, gang{Preemptable, JobPipelined, JobStarving}.
GANG_CONF = """
actions: preempt
tiers:
- plugins:
  - {name: conformance, enablePreemptable: true, enableReclaimable: false}
  - {name: gang, enablePreemptable: true, enableJobPipelined: true, enableJobStarving: true,
     enableJobOrder: false, enableJobReady: false, enableReclaimable: false}
"""

# Priority preemption as shipped: priority decides victims and orders, gang guards minMember.
PRIORITY_CONF = """
actions: preempt
tiers:
- plugins:
  - {name: priority, enablePreemptable: true, enableJobOrder: true, enableTaskOrder: true, enableJobStarving: true}
  - {name: gang, enablePreemptable: true, enableJobPipelined: true, enableJobStarving: false,
     enableJobOrder: false, enableJobReady: true, enableReclaimable: false}
  - {name: conformance, enablePreemptable: true}
- plugins:
  - {name: proportion, enableQueueOrder: true, enabledAllocatable: true, enabledOverused: false,
     enableReclaimable: false, enablePreemptive: false, enableJobEnqueued: false}
  - {name: predicates, enablePredicate: true}
  - {name: nodeorder, enableNodeOrder: true}
"""

PRIORITY_CLASSES = [{"name": "low-priority", "value": 10}, {"name": "high-priority", "value": 100000}]
PREEMPTABLE = {"volcano.sh/preemptable": "true"}


def _scenario(conf: str, **parts: Any) -> dict[str, Any]:
    return {"conf": yaml.safe_load(conf), "priorityClasses": PRIORITY_CLASSES, **parts}


def _pod(name: str, group: str, cpu: str, node: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "group": group, "req": {"cpu": cpu, "memory": f"{cpu}G"}, **extra}
    if node:
        spec.update(node=node, phase="Running")
    return spec


VOLCANO_CASES = [
    pytest.param(
        _scenario(
            GANG_CONF,
            nodes=[{"name": "n1", "alloc": {"cpu": "10", "memory": "10G"}}],
            queues=[{"name": "q1"}],
            podgroups=[{"name": "c1/pg1", "queue": "q1", "min": 3, "minTaskMember": {"": 3}}],
            pods=[
                _pod("c1/preemptee1", "pg1", "1", "n1"),
                _pod("c1/preemptee2", "pg1", "1", "n1"),
                _pod("c1/preemptor1", "pg1", "1"),
            ],
        ),
        [],
        id="do not preempt if there are enough idle resources",
    ),
    pytest.param(
        _scenario(
            GANG_CONF,
            nodes=[{"name": "n1", "alloc": {"cpu": "3", "memory": "3G"}}],
            queues=[{"name": "q1"}],
            podgroups=[
                {"name": "c1/pg1", "queue": "q1", "min": 1, "minTaskMember": {"": 2}},
                {"name": "c1/pg2", "queue": "q1", "min": 1, "minTaskMember": {"": 2}},
            ],
            pods=[
                _pod("c1/preemptee1", "pg1", "1", "n1"),
                _pod("c1/preemptee2", "pg1", "1", "n1"),
                _pod("c1/preemptee3", "pg2", "1", "n1"),
                _pod("c1/preemptor2", "pg2", "1"),
            ],
        ),
        [],
        id="do not preempt if job is pipelined",
    ),
    pytest.param(
        _scenario(
            GANG_CONF,
            nodes=[{"name": "n1", "alloc": {"cpu": "2", "memory": "2G"}}],
            queues=[{"name": "q1"}],
            podgroups=[
                {
                    "name": "c1/pg1",
                    "queue": "q1",
                    "min": 1,
                    "minTaskMember": {"": 2},
                    "priorityClassName": "low-priority",
                },
                {
                    "name": "c1/pg2",
                    "queue": "q1",
                    "min": 1,
                    "minTaskMember": {"": 2},
                    "priorityClassName": "high-priority",
                },
            ],
            pods=[
                _pod("c1/preemptee1", "pg1", "1", "n1", labels=PREEMPTABLE),
                _pod("c1/preemptee2", "pg1", "1", "n1"),
                _pod("c1/preemptor1", "pg2", "1"),
                _pod("c1/preemptor2", "pg2", "1"),
            ],
        ),
        1,
        id="preempt one task of different job to fit both jobs on one node",
    ),
    pytest.param(
        _scenario(
            GANG_CONF,
            nodes=[{"name": "n1", "alloc": {"cpu": "6", "memory": "6G"}}],
            queues=[{"name": "q1"}],
            podgroups=[
                {
                    "name": "c1/pg1",
                    "queue": "q1",
                    "min": 1,
                    "minTaskMember": {"": 3},
                    "priorityClassName": "low-priority",
                },
                {
                    "name": "c1/pg2",
                    "queue": "q1",
                    "min": 1,
                    "minTaskMember": {"": 1},
                    "priorityClassName": "high-priority",
                },
            ],
            pods=[
                _pod("c1/preemptee1", "pg1", "1", "n1", labels=PREEMPTABLE),
                _pod("c1/preemptee2", "pg1", "1", "n1", labels=PREEMPTABLE),
                _pod("c1/preemptee3", "pg1", "1", "n1", labels=PREEMPTABLE),
                _pod("c1/preemptor1", "pg2", "5"),
            ],
        ),
        2,
        id="preempt enough tasks to fit large task of different job",
    ),
]


@pytest.mark.parametrize(("scenario", "expected"), VOLCANO_CASES)
def test_volcano_preempt_cases(scenario: dict[str, Any], expected: list[str] | int) -> None:
    result = run(scenario)
    if isinstance(expected, int):
        assert len(result.evictions) == expected
        assert len(set(result.evictions)) == expected
    else:
        assert result.evictions == expected


def test_large_preemptor_evicts_the_fewest_and_is_pipelined() -> None:
    scenario = VOLCANO_CASES[3].values[0]
    result = run(scenario)
    assert result.pipelined == {"c1/preemptor1": "n1"}
    assert result.binds == {}


def _priority_scenario(**overrides: Any) -> dict[str, Any]:
    """q1 holds a 4-cpu node: a low-priority job runs on it; a high-priority job waits."""
    base: dict[str, Any] = {
        "nodes": [{"name": "n1", "alloc": {"cpu": "4", "memory": "4G"}}],
        "queues": [{"name": "q1"}],
        "podgroups": [
            {"name": "ns/low", "queue": "q1", "min": 1, "priorityClassName": "low-priority"},
            {"name": "ns/high", "queue": "q1", "min": 1, "priorityClassName": "high-priority"},
        ],
        "pods": [
            _pod("ns/low-t-0", "low", "1", "n1"),
            _pod("ns/low-t-1", "low", "1", "n1"),
            _pod("ns/low-t-2", "low", "1", "n1"),
            _pod("ns/low-t-3", "low", "1", "n1"),
            _pod("ns/high-t-0", "high", "2"),
        ],
    }
    base.update(overrides)
    return _scenario(PRIORITY_CONF, **base)


def test_higher_priority_job_preempts_lower_priority_job() -> None:
    result = run(_priority_scenario())
    # Reverse task order: the highest replica index goes first; exactly enough for 2 cpu.
    assert sorted(result.evictions) == ["ns/low-t-2", "ns/low-t-3"]
    assert result.pipelined == {"ns/high-t-0": "n1"}


def test_lower_priority_job_never_preempts_higher() -> None:
    scenario = _priority_scenario()
    for group in scenario["podgroups"]:
        group["priorityClassName"] = "high-priority" if group["name"] == "ns/low" else "low-priority"
    result = run(scenario)
    assert result.evictions == []
    assert result.pipelined == {}


def test_equal_priority_preempts_nothing() -> None:
    scenario = _priority_scenario()
    for group in scenario["podgroups"]:
        group.pop("priorityClassName")
    assert run(scenario).evictions == []


def test_preemptable_false_is_never_a_victim() -> None:
    scenario = _priority_scenario()
    not_preemptable = {"volcano.sh/preemptable": "false"}
    for pod in scenario["pods"]:
        if pod["name"] in ("ns/low-t-2", "ns/low-t-3"):
            pod["annotations"] = not_preemptable
    result = run(scenario)
    assert sorted(result.evictions) == ["ns/low-t-0", "ns/low-t-1"]
    assert result.pipelined == {"ns/high-t-0": "n1"}


def test_all_victims_protected_means_no_eviction() -> None:
    scenario = _priority_scenario()
    for pod in scenario["pods"]:
        if pod["name"].startswith("ns/low"):
            pod["annotations"] = {"volcano.sh/preemptable": "false"}
    result = run(scenario)
    assert result.evictions == []
    assert result.pipelined == {}


def test_gang_min_member_protects_victims() -> None:
    scenario = _priority_scenario()
    scenario["podgroups"][0]["min"] = 3  # the low job may lose only one of its four running tasks
    result = run(scenario)
    # One victim frees 1 cpu of the 2 needed: the node is not worth it, nothing is evicted.
    assert result.evictions == []
    assert result.pipelined == {}


def test_gang_min_member_allows_what_is_spare() -> None:
    scenario = _priority_scenario()
    scenario["podgroups"][0]["min"] = 2
    result = run(scenario)
    assert sorted(result.evictions) == ["ns/low-t-2", "ns/low-t-3"]


def test_preemptor_gang_not_pipelined_discards_evictions() -> None:
    scenario = _priority_scenario()
    scenario["podgroups"][1]["min"] = 2
    scenario["pods"].append(_pod("ns/high-t-1", "high", "3"))
    # 2 + 3 cpu cannot both fit a 4-cpu node: the first task's evictions are rolled back with the gang.
    result = run(scenario)
    assert result.evictions == []
    assert result.pipelined == {}


def test_other_queues_are_not_preempted() -> None:
    scenario = _priority_scenario()
    scenario["queues"].append({"name": "q2"})
    scenario["podgroups"][0]["queue"] = "q2"
    assert run(scenario).evictions == []


def test_best_scoring_node_is_preempted_first() -> None:
    # Both nodes are full of victims; n2 has memory to spare, so nodeorder's leastrequested ranks it first.
    scenario = _priority_scenario(
        nodes=[
            {"name": "n1", "alloc": {"cpu": "4", "memory": "4G"}},
            {"name": "n2", "alloc": {"cpu": "8", "memory": "16G"}},
        ],
    )
    nodeorder = scenario["conf"]["tiers"][1]["plugins"][2]
    nodeorder["arguments"] = {"leastrequested.weight": 1, "balancedresource.weight": 0}
    scenario["pods"] = [
        *[_pod(f"ns/low-t-{i}", "low", "1", "n1") for i in range(4)],
        *[_pod(f"ns/low-t-{i}", "low", "2", "n2") for i in range(4, 8)],
        _pod("ns/high-t-0", "high", "2"),
    ]
    result = run(scenario)
    assert result.evictions == ["ns/low-t-7"]
    assert result.pipelined == {"ns/high-t-0": "n2"}


def test_score_ties_go_to_the_lowest_node_name() -> None:
    scenario = _priority_scenario(
        nodes=[
            {"name": "n2", "alloc": {"cpu": "2", "memory": "2G"}},
            {"name": "n1", "alloc": {"cpu": "2", "memory": "2G"}},
        ],
    )
    scenario["pods"] = [
        _pod("ns/low-t-0", "low", "2", "n2"),
        _pod("ns/low-t-1", "low", "2", "n1"),
        _pod("ns/high-t-0", "high", "2"),
    ]
    result = run(scenario)
    assert result.evictions == ["ns/low-t-1"]
    assert result.pipelined == {"ns/high-t-0": "n1"}


def test_within_job_lower_task_priority_is_preempted() -> None:
    scenario = _priority_scenario()
    scenario["podgroups"] = [{"name": "ns/job", "queue": "q1", "min": 1}]
    scenario["pods"] = [
        _pod("ns/job-t-0", "job", "2", "n1", annotations={"volcano.sh/task-priority": "1"}),
        _pod("ns/job-t-1", "job", "2", "n1", annotations={"volcano.sh/task-priority": "1"}),
        _pod("ns/job-t-2", "job", "2", annotations={"volcano.sh/task-priority": "5"}),
    ]
    result = run(scenario)
    assert result.evictions == ["ns/job-t-1"]
    assert result.pipelined == {"ns/job-t-2": "n1"}


def _run_patched(scenario: dict[str, Any], pod: str, **spec: Any) -> Decisions:
    """Run a scenario after setting pod-spec fields the builders do not offer."""
    docs = documents(scenario)
    for doc in docs:
        if doc["kind"] == "Pod" and f"{doc['metadata']['namespace']}/{doc['metadata']['name']}" == pod:
            doc["spec"].update(spec)
    return run_session(build_snapshot(docs), parse_conf(scenario["conf"], registry()))


def test_preemption_policy_never_does_not_preempt() -> None:
    result = _run_patched(_priority_scenario(), "ns/high-t-0", preemptionPolicy="Never")
    assert result.evictions == []
    assert result.pipelined == {}
