"""The reference's worked numbers: binpack scores (§5.I) and proportion's water-filling examples (§4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from extender.engine.conf import parse_conf
from extender.engine.plugins.binpack import parse_arguments
from extender.engine.plugins.proportion import QueueAttr, water_fill
from extender.engine.run import open_session, registry
from extender.engine.snapshot import build_snapshot
from lapilli.resources.vector import Dims
from tests.unit.extender.engine.builders import documents

NODES = [
    {"name": "n1", "alloc": {"cpu": "2", "memory": "4Gi"}},
    {"name": "n2", "alloc": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "4"}},
    {"name": "n3", "alloc": {"cpu": "2", "memory": "4Gi", "example.com/foo": "16"}},
]
PODS = [
    {"name": "c1/p1", "group": "pg1", "node": "n1", "req": {"cpu": "1", "memory": "1Gi"}},
    {"name": "c1/p2", "group": "pg1", "node": "n3", "req": {"cpu": "1500m", "memory": "0"}},
    {"name": "c1/p3", "group": "pg1", "req": {"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "2"}},
    {"name": "c1/p4", "group": "pg1", "req": {"cpu": "3", "memory": "4Gi", "example.com/foo": "3"}},
]
ARGS_A = {
    "binpack.weight": 10, "binpack.cpu": 2, "binpack.memory": 3,
    "binpack.resources": "nvidia.com/gpu, example.com/foo",
    "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": 8,
}
ARGS_B = {"binpack.weight": 1, "binpack.cpu": 1, "binpack.memory": 1, "binpack.resources": "nvidia.com/gpu",
          "binpack.resources.nvidia.com/gpu": 23}
EXPECT_A = {"p1": [700, 137.5, 0], "p2": [0, 375, 0], "p3": [0, 531.25, 0], "p4": [0, 173.076923, 0]}
EXPECT_B = {"p1": [75, 15.625, 0], "p2": [0, 37.5, 0], "p3": [0, 50.5, 0], "p4": [0, 50, 0]}


@pytest.mark.parametrize(("args", "expect"), [(ARGS_A, EXPECT_A), (ARGS_B, EXPECT_B)])
def test_binpack_scores_match_volcano(args, expect):
    scenario = {
        "nodes": NODES,
        "queues": [{"name": "c1"}],
        "podgroups": [{"name": "c1/pg1", "queue": "c1"}],
        "pods": PODS,
    }
    conf = parse_conf({"actions": "allocate", "tiers": [{"plugins": [{"name": "binpack", "arguments": args}]}]},
                      registry())
    ssn = open_session(build_snapshot(documents(scenario)), conf)
    idx = np.arange(len(ssn.nodes))
    for pod_name, scores in expect.items():
        task = ssn.tasks[f"c1-{pod_name}"]
        assert ssn.scores(task, idx) == pytest.approx(scores, abs=1e-6), pod_name


def test_binpack_negative_resource_weight_becomes_one():
    weights = dict(parse_arguments({"binpack.resources": "example.com/foo", "binpack.resources.example.com/foo": -3}).weights)
    assert weights["example.com/foo"] == 1


def _fill(total_cpu: float, queues: list[dict]) -> dict[str, float]:
    dims = Dims(["cpu", "memory", "pods"])
    total = dims.vector({"cpu": total_cpu * 1000})
    guarantees = dims.zeros()
    for q in queues:
        guarantees += dims.vector({"cpu": q.get("guarantee", 0) * 1000})
    attrs = []
    for q in queues:
        guarantee = dims.vector({"cpu": q.get("guarantee", 0) * 1000})
        capability = dims.vector({"cpu": q["cap"] * 1000} if "cap" in q else {}, missing=np.inf)
        attrs.append(QueueAttr(
            name=q["name"], weight=q.get("weight", 1), allocated=dims.zeros(),
            request=dims.vector({"cpu": q["request"] * 1000}), elastic=dims.zeros(), inqueue=dims.zeros(),
            guarantee=guarantee, real_capability=np.minimum(np.maximum(total - guarantees, 0) + guarantee, capability),
            deserved=dims.zeros(),
        ))
    water_fill(attrs, total, dims)
    return {a.name: round(float(a.deserved[0]) / 1000, 6) for a in attrs}


def test_water_filling_by_weight():
    queues = [{"name": n, "weight": w, "request": 10} for n, w in (("a", 1), ("b", 2), ("c", 3))]
    assert _fill(12, queues) == {"a": 2, "b": 4, "c": 6}


def test_water_filling_gives_unused_share_to_others():
    queues = [{"name": "a", "request": 2}, {"name": "b", "request": 10}, {"name": "c", "request": 10}]
    assert _fill(12, queues) == {"a": 2, "b": 5, "c": 5}


def test_water_filling_respects_capability():
    assert _fill(12, [{"name": "a", "request": 10, "cap": 2}, {"name": "b", "request": 10}]) == {"a": 2, "b": 10}


def test_water_filling_reserves_guarantee():
    queues = [{"name": "a", "request": 10, "guarantee": 8}, {"name": "b", "request": 10}]
    assert _fill(12, queues) == {"a": 8, "b": 4}
