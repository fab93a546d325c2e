"""The simulator's pieces: workload parsing (durations, Job expansion, minResources) and the per-pod baseline."""

from __future__ import annotations

import pytest

from assembly.sim import DefaultScheduler, WorkloadError, load_workload
from assembly.sim.kube_default import least_allocated
from assembly.sim.lapilli_driver import LapilliScheduler
from assembly.sim.state import Cluster
from lapilli.times import parse_seconds
from tests.unit.assembly.sim.test_sim import GPU_WORKER, job, node

# --- durations ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (600, 600),
        (90.5, 90.5),
        ("600", 600),
        (" 30 ", 30),
        ("10m", 600),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("0", 0),
        ("0s", 0),
    ],
)
def test_durations(value, seconds):
    assert parse_seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["ten minutes", "10x", "", "-5", "-1m", "nan", "inf", True, None, [1]])
def test_bad_durations(value):
    with pytest.raises(ValueError, match="duration"):
        parse_seconds(value)


# --- Job expansion ----------------------------------------------------------------------------------------------


def test_job_expands_like_the_volcano_controller():
    doc = job("tf", {"ps": (2, {"cpu": "1"}), "worker": (4, GPU_WORKER)}, submit="2m", duration="10m")
    del doc["spec"]["tasks"][1]["name"]
    sim = load_workload([node("n1"), doc]).jobs[0]
    assert sim.key == "ml/tf" and sim.queue == "default"
    assert (sim.submit_at, sim.duration) == (120, 600)
    assert [p.name for p in sim.pods] == ["tf-ps-0", "tf-ps-1", *(f"tf-default1-{i}" for i in range(4))]
    assert sim.min_available == 6  # webhook default: Σ task minAvailable (= replicas)
    assert sim.min_task_member == {"ps": 2, "default1": 4}
    assert sim.min_resources == {"cpu": 6000.0, "pods": 6.0, "nvidia.com/gpu": 4000.0}


def test_min_resources_take_the_first_min_available_pods():
    # need (3) ≥ Σ task minAvailable (1 + 1): each task's minimum first, then the rest in task order.
    doc = job("j", {"ps": (2, {"cpu": "1"}), "worker": (4, GPU_WORKER)}, min_available=3)
    for task in doc["spec"]["tasks"]:
        task["minAvailable"] = 1
    sim = load_workload([node("n1"), doc]).jobs[0]
    assert sim.min_resources == {"cpu": 3000.0, "pods": 3.0, "nvidia.com/gpu": 1000.0}
    # need (3) < Σ task minAvailable (2 + 4): whole tasks greedily in order.
    doc = job("k", {"ps": (2, {"cpu": "1"}), "worker": (4, GPU_WORKER)}, min_available=3)
    sim = load_workload([node("n1"), doc]).jobs[0]
    assert sim.min_resources == {"cpu": 3000.0, "pods": 3.0, "nvidia.com/gpu": 1000.0}


def test_min_resources_follow_template_priority():
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 100}
    doc = job("j", {"ps": (2, {"cpu": "1"}), "worker": (4, GPU_WORKER)}, min_available=2)
    doc["spec"]["tasks"][1]["template"]["spec"]["priorityClassName"] = "hi"
    sim = load_workload([node("n1"), pc, doc]).jobs[0]
    assert sim.min_resources == {"cpu": 2000.0, "pods": 2.0, "nvidia.com/gpu": 2000.0}


def test_first_jobs_keeps_the_earliest_submissions():
    work = load_workload(
        [node("n1"), job("late", {"w": (1, GPU_WORKER)}, submit=50), job("early", {"w": (1, GPU_WORKER)}, submit=5)]
    )
    assert [j.name for j in work.first_jobs(1).jobs] == ["early"]
    assert len(work.first_jobs(9).jobs) == 2


def test_workload_needs_nodes_and_unique_jobs():
    with pytest.raises(WorkloadError, match="no Node"):
        load_workload([job("a", {"w": (1, GPU_WORKER)})])
    with pytest.raises(WorkloadError, match=r"document 2 .*second Job named ml/a"):
        load_workload([node("n1"), job("a", {"w": (1, GPU_WORKER)}), job("a", {"w": (1, GPU_WORKER)})])


def test_nodes_without_a_pod_limit_get_kubelets_default():
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "2"}}}
    cluster = Cluster.create(load_workload([bare]))
    assert cluster.nodes["n"].allocatable["pods"] == 110


# --- the per-pod baseline ---------------------------------------------------------------------------------------


def test_least_allocated_score():
    # cpu: (4000 − 1000) × 100 // 4000 = 75; memory: (8 − 2) × 100 // 8 = 75.
    assert least_allocated({"cpu": 4000.0, "memory": 8.0}, (1000.0, 2.0)) == 75
    assert least_allocated({"cpu": 4000.0, "memory": 8.0}, (5000.0, 2.0)) == 37


def test_default_spreads_by_least_allocated_and_breaks_ties_by_name():
    work = load_workload([node("b"), node("a"), job("j", {"w": (3, {"cpu": "4", "memory": "1Gi"})})])
    cluster = Cluster.create(work)
    cluster.submit("ml/j", 0)
    DefaultScheduler().cycle(cluster, 0)
    assert [cluster.pods[f"ml/j-w-{i}"].node for i in range(3)] == ["a", "b", "a"]


def test_default_respects_gpu_fit_selectors_and_taints():
    tainted = node("t", gpu="8")
    tainted["spec"] = {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}
    cordoned = node("c", gpu="8")
    cordoned["spec"] = {"unschedulable": True}
    work = load_workload([node("g", gpu="1"), tainted, cordoned, job("j", {"w": (2, GPU_WORKER)})])
    cluster = Cluster.create(work)
    cluster.submit("ml/j", 0)
    DefaultScheduler().cycle(cluster, 0)
    assert sorted(str(p.node) for p in cluster.pods.values()) == ["None", "g"]


def test_lapilli_snapshot_carries_podgroup_phase_and_placements():
    work = load_workload([node("n1", gpu="4"), job("j", {"w": (4, GPU_WORKER)})])
    cluster = Cluster.create(work)
    cluster.submit("ml/j", 0)
    scheduler = LapilliScheduler()
    assert scheduler.cycle(cluster, 0)
    assert all(p.node == "n1" for p in cluster.pods.values())
    docs = scheduler.documents(cluster)
    podgroup = next(d for d in docs if d["kind"] == "PodGroup")
    assert podgroup["status"]["phase"] == cluster.jobs["ml/j"].pg_phase != "Pending"
    assert podgroup["spec"]["minResources"]["nvidia.com/gpu"] == "4000m"
    assert any(d["kind"] == "Queue" and d["metadata"]["name"] == "default" for d in docs)
    assert all(d["status"]["phase"] == "Running" for d in docs if d["kind"] == "Pod")
