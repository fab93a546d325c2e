"""The simulator carries each queue's decayed usage through simulated time (as the service's leader persists it), so
fairshare orders queues by what they used earlier in the simulation."""

from __future__ import annotations

import math
from typing import Any

import pytest

from assembly.sim import LapilliScheduler, load_workload, sim_conf, simulate
from lapilli.usage import hours

GPU = "nvidia.com/gpu"
CONF = """
actions: enqueue, allocate
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{fairshare}{name: predicates}, {name: capacity}]
"""


def _job(name: str, queue: str, at: str, duration: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", GPU: "1"}}}]}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": queue,
                         "annotations": {"sim.lapilli.io/submit-at": at, "sim.lapilli.io/duration": duration}},
            "spec": {"queue": queue, "minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {"spec": pod}}]}}


def _workload() -> Any:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", GPU: "1"}}}
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
               "spec": {"weight": 1}} for q in ("lab-a", "lab-b")]
    # lab-a runs ten hours alone; then both labs submit at the same moment, lab-a's job first in name order.
    jobs = [_job("long", "lab-a", "0", "10h"), _job("next", "lab-a", "10h", "1h"), _job("next", "lab-b", "10h", "1h")]
    return load_workload([node, *queues, *jobs])


@pytest.mark.parametrize(("fairshare", "first"), [("", "lab-a/next"), ("{name: fairshare, arguments: {halfLife: 24h}}, ",
                                                                       "lab-b/next")])
def test_earlier_usage_in_the_simulation_orders_later_jobs(fairshare: str, first: str) -> None:
    scheduler = LapilliScheduler(sim_conf(CONF.replace("{fairshare}", fairshare)))
    result = simulate(_workload(), scheduler)
    assert result.jobs[first].started == 36000
    if fairshare:
        usage = next(u for t, u in scheduler.usage_history if t == 36000)
        # Ten hours of one GPU, decayed with a one-day half-life as it was used: ∫0^10h 2^-(10h-s)/24h ds.
        tau = 24 / math.log(2)
        assert hours(GPU, usage["lab-a"][GPU]) == pytest.approx(tau * (1 - 2 ** (-10 / 24)))  # 8.69 GPU·h
        assert "lab-b" not in usage or not usage["lab-b"]
    else:
        assert scheduler.usage_history == []
