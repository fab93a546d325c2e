"""Per-lab figures of a simulation (`lapilli simulate --groups`): user queues roll up into their top-level queue,
waits are start − submit, utilization is the group's GPU-seconds over the cluster's; the lab week runs whole."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from assembly.cli import main
from assembly.sim import LapilliScheduler, load_workload, sim_conf, simulate
from assembly.sim.groups import group_stats, top_level
from tests.unit.assembly.sim.test_sim import job, node

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def _queue(name: str, parent: str | None = None) -> dict:
    spec = {"weight": 1} | ({"parent": parent} if parent else {})
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_user_queues_roll_up_into_their_lab() -> None:
    queues = [_queue("lab-a"), _queue("alice", "lab-a"), _queue("alice-x", "alice"), _queue("solo")]
    assert top_level(queues) == {"lab-a": "lab-a", "alice": "lab-a", "alice-x": "lab-a", "solo": "solo"}


def test_waits_and_utilization_per_group() -> None:
    docs = [node("n1", gpu="2"), _queue("lab-a"), _queue("alice", "lab-a"), _queue("lab-b"), _queue("carol", "lab-b")]
    gpu = {"cpu": "1", "nvidia.com/gpu": "2"}
    first = job("a1", {"w": (1, gpu)}, submit=0, duration=100)
    second = job("c1", {"w": (1, gpu)}, submit=0, duration=100)
    first["spec"]["queue"], second["spec"]["queue"] = "alice", "carol"
    conf = sim_conf((EXAMPLES / "lab-platform" / "scheduler-conf.yaml").read_text())
    result = simulate(load_workload([*docs, first, second]), LapilliScheduler(conf))
    stats = {s.group: s for s in group_stats(result, [d for d in docs if d["kind"] == "Queue"])}
    # One 2-GPU node: one job runs 0–100, the other waits for it and runs 100–200.
    assert sorted(s.max_wait_s for s in stats.values()) == [0, 100]
    assert stats["lab-a"].gpu_utilization == stats["lab-b"].gpu_utilization == 0.5


def test_the_lab_week_reports_both_labs() -> None:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / "sim" / "lab-week.yaml"), "--conf",
                                       str(EXAMPLES / "lab-platform" / "scheduler-conf.yaml"), "--groups", "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["unfinished"] == [] and out["gpu_idle_held_s"] == 0  # gangs whole: no GPU held by a waiting job
    assert set(out["groups"]["lapilli"]) == {"lab-a", "lab-b"}
    assert sum(g["jobs"] for g in out["groups"]["lapilli"].values()) == 60
