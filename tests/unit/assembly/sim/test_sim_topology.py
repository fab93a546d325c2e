"""The simulator's data-exchange cost and task-topology: a job whose ps and workers exchange data runs longer the
more of its ps–worker pairs sit on different nodes, and the talk's scenario (examples/sim/task-topology.yaml)
packs each job onto one node under Lapilli with task-topology and binpack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from assembly.sim import DefaultScheduler, LapilliScheduler, WorkloadError, load_workload, sim_conf, simulate
from tests.unit.assembly.sim.test_sim import job, node

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
PS, WORKER = {"cpu": "2", "memory": "4Gi"}, {"cpu": "3", "memory": "8Gi"}


def _tf(annotations: dict[str, str]) -> dict[str, Any]:
    doc = job("tf", {"ps": (2, PS), "worker": (4, WORKER)})
    doc["metadata"]["annotations"].update(annotations)
    return doc


EXCHANGE = {"sim.lapilli.io/exchange": "ps,worker", "sim.lapilli.io/exchange-cost": "10m"}


def test_run_time_grows_with_the_share_of_pairs_on_different_nodes() -> None:
    sim_job = load_workload([node("n1"), _tf(EXCHANGE)]).jobs[0]
    ps, workers = ["tf-ps-0", "tf-ps-1"], [f"tf-worker-{i}" for i in range(4)]
    together = dict.fromkeys(ps + workers, "n1")
    assert sim_job.run_time(together) == 600
    apart = {**dict.fromkeys(ps, "n1"), **dict.fromkeys(workers, "n2")}
    assert sim_job.run_time(apart) == 1200
    half = {**dict.fromkeys(ps, "n1"), **dict.fromkeys(workers[:2], "n1"), **dict.fromkeys(workers[2:], "n2")}
    assert sim_job.run_time(half) == 900  # 4 of 8 pairs cross


@pytest.mark.parametrize(("annotations", "message"), [
    ({"sim.lapilli.io/exchange": "ps,worker"}, "go together"),
    ({"sim.lapilli.io/exchange": "ps", "sim.lapilli.io/exchange-cost": "1m"}, "two task names"),
    ({"sim.lapilli.io/exchange": "ps,chief", "sim.lapilli.io/exchange-cost": "1m"}, "no task 'chief'"),
    ({"sim.lapilli.io/exchange": "ps,worker", "sim.lapilli.io/exchange-cost": "soon"}, "exchange-cost"),
])
def test_bad_exchange_annotations_are_named(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(WorkloadError) as exc:
        load_workload([node("n1"), _tf(annotations)])
    assert message in str(exc.value)


def test_the_talks_scenario_packs_each_job_onto_one_node_with_task_topology() -> None:
    work = load_workload(list(yaml.safe_load_all((EXAMPLES / "sim" / "task-topology.yaml").read_text())))
    conf = sim_conf((EXAMPLES / "scheduler-conf-task-topology.yaml").read_text())
    packed = simulate(work, LapilliScheduler(conf))
    spread = simulate(work, DefaultScheduler())
    # Packed, every job runs its bare 10 minutes: 3 × 600 s.
    assert packed.unfinished == [] and packed.job_time_s == 1800
    assert spread.unfinished == [] and spread.job_time_s > packed.job_time_s
