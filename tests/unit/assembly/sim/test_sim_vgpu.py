"""Shared GPUs in the simulator (issue 18): a workload's nodes register vGPU cards and its device config passes
through; each placed pod keeps the cards the session gave it, which the next session counts (a running pod's
assignment annotation), so a card is never over-filled across cycles; an evicted or finished pod frees its cards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assembly.sim import LapilliScheduler, load_workload, sim_conf, simulate
from assembly.sim.lapilli_driver import pod_document
from assembly.sim.state import Cluster
from tests.unit.assembly.sim.test_sim import job

CONF = Path(__file__).resolve().parents[4] / "examples" / "scheduler-conf-vgpu.yaml"


def card_node(name: str, cards: int = 1) -> dict[str, Any]:
    """Its totals in allocatable are twice its cards' (never the binding limit here: the cards are)."""
    register = "".join(f"{name}-c{c},10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(cards))
    alloc = {"cpu": "16", "memory": "64Gi", "pods": "110", "volcano.sh/vgpu-number": str(20 * cards),
             "volcano.sh/vgpu-memory": str(2 * 81920 * cards), "volcano.sh/vgpu-cores": str(200 * cards)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                            "annotations": {"volcano.sh/node-vgpu-register": register}},
            "status": {"allocatable": alloc}}


def vgpu_job(name: str, memory: int, submit: int = 0, duration: int = 600) -> dict[str, Any]:
    ask = {"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}
    doc = job(name, {"w": (1, ask)}, submit=submit, duration=duration)
    for task in doc["spec"]["tasks"]:
        task["template"]["spec"]["containers"][0]["resources"]["limits"] = {
            k: v for k, v in ask.items() if k.startswith("volcano.sh/")}
    return doc


def test_jobs_arriving_one_by_one_share_a_card_and_never_overfill_it() -> None:
    # Each job arrives in its own event (its own sessions): only the running pods' annotations tell the next
    # session which card holds what.
    docs = [card_node("n0"), *(vgpu_job(f"j{i}", 20480, submit=i * 10, duration=3600) for i in range(5))]
    result = simulate(load_workload(docs), LapilliScheduler(sim_conf(CONF.read_text())))
    started = {k: j.started for k, j in result.jobs.items()}
    assert [started[f"ml/j{i}"] for i in range(4)] == [0, 10, 20, 30]  # four 20 GB share the 80 GB card
    assert started["ml/j4"] == 3600  # the fifth waits for the first to finish


def test_a_placed_pod_carries_its_cards_into_the_next_snapshot() -> None:
    work = load_workload([card_node("n0", cards=2), vgpu_job("j", 20480)])
    cluster = Cluster.create(work)
    cluster.submit("ml/j", 0.0)
    scheduler = LapilliScheduler(sim_conf(CONF.read_text()))
    assert scheduler.cycle(cluster, 0.0)
    (pod,) = cluster.pods.values()
    assert pod.node == "n0" and pod.devices is not None and pod.devices[0][0].memory == 20480
    notes = pod_document(pod, "j")["metadata"]["annotations"]
    assert notes["volcano.sh/vgpu-ids-new"] == f"{pod.devices[0][0].uuid},NVIDIA,20480,0:"
    assert notes["volcano.sh/vgpu-node"] == "n0"
