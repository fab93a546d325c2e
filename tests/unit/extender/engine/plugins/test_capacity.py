"""capacity plugin: realCapability limits allocation, deserved drives reclaim, guarantees hold, and the queue tree.

Confs write every flag that matters (Volcano's unit tests leave unlisted flags off; our conf files default them on).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from extender.engine.arguments import ConfError
from extender.engine.conf import parse_conf
from extender.engine.plugins.capacity import CapacityPlugin, parse_arguments
from extender.engine.run import open_session, registry
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents, run


def _conf(actions: str, hierarchy: bool = False, **capacity_args: Any) -> dict[str, Any]:
    capacity: dict[str, Any] = {
        "name": "capacity",
        "enableHierarchy": hierarchy,
        "enableQueueOrder": True,
        "enableReclaimable": True,
        "enablePreemptive": True,
        "enabledAllocatable": True,
        "enableJobEnqueued": True,
    }
    if capacity_args:
        capacity["arguments"] = capacity_args
    return yaml.safe_load(
        yaml.safe_dump(
            {
                "actions": actions,
                # One tier, as in Volcano's capacity tests: the first tier with victims decides, so capacity's
                # Reclaimable vote counts only next to gang's and conformance's.
                "tiers": [
                    {
                        "plugins": [
                            {"name": "priority", "enableJobStarving": False, "enablePreemptable": False},
                            {"name": "gang", "enablePreemptable": False, "enableReclaimable": True},
                            {"name": "conformance"},
                            capacity,
                            {"name": "predicates"},
                            {"name": "nodeorder"},
                        ]
                    },
                ],
            }
        )
    )


def _pod(name: str, group: str, cpu: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "group": group, "req": {"cpu": cpu, "memory": f"{cpu}G"}}
    if node:
        spec.update(node=node, phase="Running")
    return spec


def _pending(group: str, count: int, cpu: str = "1") -> list[dict[str, Any]]:
    ns, name = group.split("/")
    return [_pod(f"{ns}/{name}-t-{i}", name, cpu) for i in range(count)]


def _running(group: str, count: int, node: str, cpu: str = "1") -> list[dict[str, Any]]:
    ns, name = group.split("/")
    return [_pod(f"{ns}/{name}-t-{i}", name, cpu, node) for i in range(count)]


NODE8 = [{"name": "n1", "alloc": {"cpu": "8", "memory": "8G"}}]
NODE4 = [{"name": "n1", "alloc": {"cpu": "4", "memory": "4G"}}]


# ---- flat: allocation ---------------------------------------------------------------------------------------
def test_allocation_is_limited_by_capability_not_deserved() -> None:
    result = run(
        {
            "conf": _conf("allocate"),
            "nodes": NODE8,
            "queues": [{"name": "q1", "deserved": {"cpu": "1", "memory": "1G"}, "capability": {"cpu": "3"}}],
            "podgroups": [{"name": "ns/job", "queue": "q1", "min": 0}],
            "pods": _pending("ns/job", 5),
        }
    )
    assert sorted(result.binds) == ["ns/job-t-0", "ns/job-t-1", "ns/job-t-2"]


def test_other_queues_guarantees_shrink_real_capability() -> None:
    result = run(
        {
            "conf": _conf("allocate"),
            "nodes": NODE8,
            "queues": [
                {"name": "q1", "deserved": {"cpu": "8", "memory": "8G"}},
                {"name": "q2", "guarantee": {"cpu": "5"}},
            ],
            "podgroups": [{"name": "ns/job", "queue": "q1", "min": 0}],
            "pods": _pending("ns/job", 5),
        }
    )
    # realCapability(q1) = 8 − 5 guaranteed to q2 = 3 cpu.
    assert len(result.binds) == 3


def test_closed_queue_allocates_nothing() -> None:
    result = run(
        {
            "conf": _conf("allocate"),
            "nodes": NODE8,
            "queues": [{"name": "q1", "deserved": {"cpu": "2"}, "state": "Closed"}],
            "podgroups": [{"name": "ns/job", "queue": "q1", "min": 0}],
            "pods": _pending("ns/job", 1),
        }
    )
    assert result.binds == {}


def test_deserved_and_share_are_reported() -> None:
    result = run(
        {
            "conf": _conf("allocate"),
            "nodes": NODE8,
            "queues": [
                {"name": "q1", "deserved": {"cpu": "4", "memory": "4G"}},
                {"name": "q2", "deserved": {"cpu": "20"}, "guarantee": {"cpu": "1"}},
                {"name": "q3"},
            ],
            "podgroups": [
                {"name": "ns/a", "queue": "q1", "min": 0},
                {"name": "ns/b", "queue": "q2", "min": 0},
                {"name": "ns/c", "queue": "q3", "min": 0},
            ],
            "pods": [*_running("ns/a", 2, "n1"), *_pending("ns/b", 1), *_pending("ns/c", 1)],
        }
    )
    assert result.to_json()["queues"]["q1"]["deserved"]["cpu"] == "4"
    assert result.to_json()["queues"]["q1"]["share"] == 0.5
    # q2's deserved is capped by its realCapability: 8 − 1 guaranteed + its own 1 = 8 cpu.
    assert result.to_json()["queues"]["q2"]["deserved"]["cpu"] == "8"
    # A queue without deserved is best effort: share 1.
    assert result.to_json()["queues"]["q3"]["share"] == 1.0


# ---- flat: enqueue --------------------------------------------------------------------------------------------
def test_enqueue_admits_jobs_within_real_capability() -> None:
    conf = _conf("enqueue")
    result = run(
        {
            "conf": conf,
            "nodes": NODE8,
            "queues": [{"name": "q1", "deserved": {"cpu": "2"}, "capability": {"cpu": "4"}}],
            "podgroups": [
                {"name": "ns/a", "queue": "q1", "min": 1, "phase": "Pending", "minResources": {"cpu": "3"}},
                {"name": "ns/b", "queue": "q1", "min": 1, "phase": "Pending", "minResources": {"cpu": "2"}},
                {"name": "ns/c", "queue": "q1", "min": 1, "phase": "Pending", "minResources": {"cpu": "1"}},
            ],
            "pods": [*_pending("ns/a", 1), *_pending("ns/b", 1), *_pending("ns/c", 1)],
        }
    )
    # a (3) fits, b (3 + 2 > 4) is refused, c (3 + 1) fits.
    phases = {key: pg.phase for key, pg in result.podgroups.items()}
    assert phases == {"ns/a": "Inqueue", "ns/b": "Pending", "ns/c": "Inqueue"}


def test_enqueue_rejection_records_an_event() -> None:
    scenario = {
        "conf": _conf("enqueue"),
        "nodes": NODE8,
        "queues": [{"name": "q1", "capability": {"cpu": "2"}}],
        "podgroups": [{"name": "ns/a", "queue": "q1", "min": 1, "phase": "Pending", "minResources": {"cpu": "3"}}],
        "pods": _pending("ns/a", 1),
    }
    ssn = open_session(build_snapshot(documents(scenario)), parse_conf(scenario["conf"], registry()))
    assert not ssn.job_enqueueable(ssn.jobs["ns/a"])
    assert ("ns/a", "Normal", "Unschedulable", "queue resource quota insufficient: insufficient cpu") in (
        ssn.records.events
    )


# ---- flat: reclaim ---------------------------------------------------------------------------------------------
def _reclaim_scenario(q1: dict[str, Any], q2: dict[str, Any], hungry_min: int = 2) -> dict[str, Any]:
    return {
        "conf": _conf("reclaim"),
        "nodes": NODE4,
        "queues": [{"name": "q1", **q1}, {"name": "q2", **q2}],
        "podgroups": [
            {"name": "ns/busy", "queue": "q1", "min": 1},
            {"name": "ns/hungry", "queue": "q2", "min": hungry_min},
        ],
        "pods": [*_running("ns/busy", 4, "n1"), *_pending("ns/hungry", 2)],
    }


DESERVED2 = {"deserved": {"cpu": "2", "memory": "2G"}}


def test_reclaim_takes_back_what_is_above_deserved() -> None:
    result = run(_reclaim_scenario(DESERVED2, DESERVED2))
    assert sorted(result.evictions) == ["ns/busy-t-2", "ns/busy-t-3"]
    assert result.pipelined == {"ns/hungry-t-0": "n1", "ns/hungry-t-1": "n1"}


def test_queue_within_deserved_is_not_reclaimed() -> None:
    result = run(_reclaim_scenario({"deserved": {"cpu": "4", "memory": "4G"}}, DESERVED2))
    assert result.evictions == []


def test_guarantee_is_never_reclaimed() -> None:
    q1 = {"deserved": {"cpu": "2", "memory": "2G"}, "guarantee": {"cpu": "3"}}
    result = run(_reclaim_scenario(q1, DESERVED2, hungry_min=1))
    # q1 may fall to its 3-cpu guarantee, no further: one task goes.
    assert result.evictions == ["ns/busy-t-3"]


def test_best_effort_queue_is_an_immediate_victim_but_cannot_reclaim() -> None:
    result = run(_reclaim_scenario({}, DESERVED2))
    assert sorted(result.evictions) == ["ns/busy-t-2", "ns/busy-t-3"]
    reverse = _reclaim_scenario(DESERVED2, {})
    assert run(reverse).evictions == []


def test_queue_at_capability_cannot_reclaim() -> None:
    result = run(_reclaim_scenario(DESERVED2, {"deserved": {"cpu": "2"}, "capability": {"cpu": "1"}}))
    assert result.evictions == []


# ---- hierarchy --------------------------------------------------------------------------------------------------
def _tree_queues() -> list[dict[str, Any]]:
    return [
        {"name": "root"},
        {"name": "a", "capability": {"cpu": "4"}, "deserved": {"cpu": "4"}},
        {"name": "a1", "parent": "a", "deserved": {"cpu": "2"}},
        {"name": "a2", "parent": "a", "guarantee": {"cpu": "1"}, "deserved": {"cpu": "1"}},
        {"name": "b", "deserved": {"cpu": "4"}},
    ]


def test_child_real_capability_comes_from_parent() -> None:
    result = run(
        {
            "conf": _conf("allocate", hierarchy=True),
            "nodes": NODE8,
            "queues": _tree_queues(),
            "podgroups": [{"name": "ns/job", "queue": "a1", "min": 0}],
            "pods": _pending("ns/job", 6),
        }
    )
    # a1 inherits a's 4-cpu capability; its sibling a2 guarantees 1 → realCapability(a1) = 4 − 1 = 3.
    assert len(result.binds) == 3


def test_tree_attributes() -> None:
    scenario = {
        "conf": _conf("allocate", hierarchy=True),
        "nodes": NODE8,
        "queues": _tree_queues(),
        "podgroups": [{"name": "ns/job", "queue": "a2", "min": 0}],
        "pods": _running("ns/job", 1, "n1"),
    }
    ssn = open_session(build_snapshot(documents(scenario)), parse_conf(scenario["conf"], registry()))
    plugin = next(p for _, _, p in ssn.plugins if isinstance(p, CapacityPlugin))
    cpu = ssn.dims.index["cpu"]
    attrs = plugin.attrs
    assert attrs["a1"].ancestors == ["root", "a"]
    assert attrs["a"].children == ["a1", "a2"]
    assert attrs["root"].real_capability[cpu] == np.inf
    assert attrs["a2"].real_capability[cpu] == 4000  # 4 − 1 (sibling guarantees) + 1 (own)
    assert attrs["b"].real_capability[cpu] == np.inf  # root is unbounded, b sets no capability
    assert attrs["root"].deserved[cpu] == 8000  # Σ children's deserved
    assert attrs["a2"].allocated[cpu] == attrs["a"].allocated[cpu] == attrs["root"].allocated[cpu] == 1000
    assert attrs["a2"].share == 1.0


def test_job_in_a_non_leaf_queue_stops_capacity() -> None:
    result = run(
        {
            "conf": _conf("allocate", hierarchy=True),
            "nodes": NODE8,
            "queues": _tree_queues(),
            "podgroups": [{"name": "ns/job", "queue": "a", "min": 0}, {"name": "ns/other", "queue": "b", "min": 0}],
            "pods": [*_pending("ns/job", 1), *_pending("ns/other", 1)],
        }
    )
    assert result.binds == {}


def test_missing_root_is_virtual() -> None:
    queues = [q for q in _tree_queues() if q["name"] != "root"]
    result = run(
        {
            "conf": _conf("allocate", hierarchy=True),
            "nodes": NODE8,
            "queues": queues,
            "podgroups": [{"name": "ns/job", "queue": "a1", "min": 0}],
            "pods": _pending("ns/job", 6),
        }
    )
    assert len(result.binds) == 3


def test_hierarchical_reclaim_prefers_victims_near_the_reclaimer() -> None:
    queues = _tree_queues()
    queues[1]["capability"] = {"cpu": "8"}
    queues[4]["deserved"] = {"cpu": "1"}
    scenario = {
        "conf": _conf("reclaim", hierarchy=True),
        "nodes": NODE4,
        "queues": queues,
        "podgroups": [
            {"name": "ns/sib", "queue": "a2", "min": 1},
            {"name": "ns/far", "queue": "b", "min": 1},
            {"name": "ns/hungry", "queue": "a1", "min": 1},
        ],
        "pods": [*_running("ns/sib", 2, "n1"), *_running("ns/far", 2, "n1"), *_pending("ns/hungry", 1)],
    }
    # a2 (a1's sibling) and b both hold 2 of their deserved 1; victims under the reclaimer's parent go first.
    result = run(scenario)
    assert result.evictions == ["ns/sib-t-1"]
    assert result.pipelined == {"ns/hungry-t-0": "n1"}


def test_victims_above_deserved_only() -> None:
    queues = _tree_queues()
    queues[1]["capability"] = {"cpu": "8"}
    queues[3]["deserved"] = {"cpu": "2"}  # a2 at deserved: only b (above its 1) can pay
    queues[4]["deserved"] = {"cpu": "1"}
    scenario = {
        "conf": _conf("reclaim", hierarchy=True),
        "nodes": NODE4,
        "queues": queues,
        "podgroups": [
            {"name": "ns/sib", "queue": "a2", "min": 1},
            {"name": "ns/far", "queue": "b", "min": 1},
            {"name": "ns/hungry", "queue": "a1", "min": 1},
        ],
        "pods": [*_running("ns/sib", 2, "n1"), *_running("ns/far", 2, "n1"), *_pending("ns/hungry", 1)],
    }
    assert run(scenario).evictions == ["ns/far-t-1"]


def test_ancestor_reclaim_level_must_be_an_integer() -> None:
    with pytest.raises(ConfError) as caught:
        parse_conf(_conf("reclaim", ancestorReclaimLevel="x"), registry())
    assert str(caught.value) == 'plugin capacity: argument ancestorReclaimLevel: "x" is not an integer'
    assert CapacityPlugin(parse_arguments({"ancestorReclaimLevel": -2})).ancestor_level == 0
