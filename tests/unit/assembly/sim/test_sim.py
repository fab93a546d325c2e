"""`lapilli simulate`: the seed gang-deadlock cases, event ordering, the JSON shape and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from assembly.cli import main
from assembly.sim import DefaultScheduler, LapilliScheduler, SimResult, Workload, load_workload, simulate
from assembly.sim.state import Cluster

SEED = Path(__file__).resolve().parents[4] / "examples" / "sim" / "seed-gang-deadlock.yaml"


def node(name: str, cpu: str = "16", gpu: str = "2", memory: str = "64Gi") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpu, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def job(
    name: str,
    tasks: dict[str, tuple[int, dict[str, str]]],
    submit: Any = 0,
    duration: Any = 600,
    min_available: int | None = None,
    namespace: str = "ml",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tasks": [
            {
                "name": task,
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": req}}]}},
            }
            for task, (replicas, req) in tasks.items()
        ]
    }
    if min_available is not None:
        spec["minAvailable"] = min_available
    annotations = {"sim.lapilli.io/submit-at": str(submit), "sim.lapilli.io/duration": str(duration)}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
    }


GPU_WORKER = {"cpu": "1", "nvidia.com/gpu": "1"}


def seed(jobs: int) -> Workload:
    return load_workload(list(yaml.safe_load_all(SEED.read_text()))).first_jobs(jobs)


def run_both(work: Workload) -> tuple[SimResult, SimResult]:
    return simulate(work, LapilliScheduler()), simulate(work, DefaultScheduler())


# --- the seed workload: the case from Volcano's talk -------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 2, 5])
def test_seed_under_lapilli_every_job_completes_and_no_gpu_is_held_idle(jobs):
    result = simulate(seed(jobs), LapilliScheduler())
    assert len(result.jobs) == jobs
    assert result.unfinished == []
    assert all(j.state == "Completed" for j in result.jobs.values())
    assert result.gpu_idle_held_s == 0


def test_seed_one_job_is_the_same_under_both():
    lapilli, default = run_both(seed(1))
    assert lapilli.to_json() == default.to_json()
    assert default.unfinished == [] and default.gpu_idle_held_s == 0


def test_seed_two_jobs_under_default_hold_gpus_idle_while_the_second_waits():
    lapilli, default = run_both(seed(2))
    assert default.gpu_idle_held_s > 0
    assert lapilli.gpu_idle_held_s == 0
    second = default.jobs["ml/tf-2"]
    # The second job is half placed from its submission on, but starts only when the first frees its GPUs.
    assert second.submitted is not None and second.started is not None and second.started > second.submitted
    assert second.started == default.jobs["ml/tf-1"].finished


def test_seed_five_jobs_under_default_deadlock_with_only_some_finished():
    lapilli, default = run_both(seed(5))
    finished = [k for k, j in default.jobs.items() if j.state == "Completed"]
    assert len(default.unfinished) >= 1
    assert 1 <= len(finished) < 5
    assert default.deadlocked
    for key in default.unfinished:
        stuck = default.jobs[key]
        assert stuck.state == "Deadlocked" and stuck.started is None
        assert 0 < stuck.placed < stuck.pods  # partially placed: the per-pod baseline's failure mode
    assert lapilli.unfinished == [] and not lapilli.deadlocked
    assert lapilli.makespan_s > 0


def test_seed_results_are_deterministic():
    assert simulate(seed(5), DefaultScheduler()).to_json() == simulate(seed(5), DefaultScheduler()).to_json()
    assert simulate(seed(5), LapilliScheduler()).to_json() == simulate(seed(5), LapilliScheduler()).to_json()


# --- event ordering -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheduler", [LapilliScheduler, DefaultScheduler])
def test_a_finish_frees_resources_for_a_submission_at_the_same_instant(scheduler):
    work = load_workload(
        [
            node("n1", gpu="4"),
            job("a", {"w": (4, GPU_WORKER)}, submit=0, duration=600),
            job("b", {"w": (4, GPU_WORKER)}, submit=600, duration="5m"),
        ]
    )
    result = simulate(work, scheduler())
    assert result.jobs["ml/a"].finished == 600
    assert (result.jobs["ml/b"].started, result.jobs["ml/b"].finished) == (600, 900)
    assert result.makespan_s == 900
    assert result.gpu_utilization == pytest.approx(1.0)


@pytest.mark.parametrize("scheduler", [LapilliScheduler, DefaultScheduler])
def test_a_job_starts_only_once_min_available_pods_run(scheduler):
    # b needs all 3 of its pods; a holds 2 of the 4 GPUs until 1000.
    work = load_workload(
        [
            node("n1", gpu="4"),
            job("a", {"w": (2, GPU_WORKER)}, submit=0, duration=1000),
            job("b", {"w": (3, GPU_WORKER)}, submit=10, duration=100),
        ]
    )
    result = simulate(work, scheduler())
    assert result.jobs["ml/b"].started == 1000
    assert result.jobs["ml/b"].finished == 1100


def test_min_available_below_replicas_starts_with_a_partial_gang():
    work = load_workload([node("n1", gpu="2"), job("a", {"w": (4, GPU_WORKER)}, min_available=2, duration=60)])
    result = simulate(work, DefaultScheduler())
    assert result.jobs["ml/a"].started == 0 and result.jobs["ml/a"].finished == 60


def test_zero_duration_job_finishes_when_it_starts():
    work = load_workload([node("n1"), job("a", {"w": (1, GPU_WORKER)}, submit="1m", duration="0s")])
    result = simulate(work, LapilliScheduler())
    assert result.jobs["ml/a"].to_json() == {"submitted": 60, "started": 60, "finished": 60, "state": "Completed"}


def test_pods_of_jobs_submitted_together_interleave_in_the_default_queue():
    work = load_workload(
        [
            node("n1", gpu="4"),
            job("a", {"w": (4, GPU_WORKER)}),
            job("b", {"w": (4, GPU_WORKER)}),
        ]
    )
    cluster = Cluster.create(work)
    cluster.submit("ml/a", 0)
    cluster.submit("ml/b", 0)
    DefaultScheduler().cycle(cluster, 0)
    placed = sorted(p.name for p in cluster.pods.values() if p.node)
    assert placed == ["a-w-0", "a-w-1", "b-w-0", "b-w-1"]


def test_a_job_that_can_never_fit_stays_pending_and_the_loop_ends():
    work = load_workload([node("n1", gpu="2"), job("big", {"w": (4, GPU_WORKER)})])
    for scheduler in (LapilliScheduler(), DefaultScheduler()):
        result = simulate(work, scheduler)
        assert result.unfinished == ["ml/big"]
    assert simulate(work, LapilliScheduler()).jobs["ml/big"].state == "Pending"
    # The per-pod baseline places the two pods that fit and keeps them: a deadlock of one.
    assert simulate(work, DefaultScheduler()).jobs["ml/big"].state == "Deadlocked"


class _EvictOnce:
    """Places every pending pod on n1, except that at t=100 it evicts a-w-0 and keeps it out until t=200."""

    name = "evictor"

    def __init__(self) -> None:
        self.evicted = False

    def elapse(self, cluster: Cluster, start: float, end: float) -> None:
        pass

    def cycle(self, cluster: Cluster, now: float) -> bool:
        victim = cluster.pods.get("ml/a-w-0")
        if now >= 100 and not self.evicted and victim is not None:
            self.evicted = True
            victim.node = None
            return True
        changed = False
        for pod in cluster.pods.values():
            if pod.node is None and (pod is not victim or not 100 <= now < 200):
                pod.node = "n1"
                changed = True
        return changed


def test_an_interrupted_job_starts_again_from_scratch():
    work = load_workload(
        [
            node("n1"),
            job("a", {"w": (2, GPU_WORKER)}, duration=300),
            job("tick", {"w": (1, {"cpu": "1"})}, submit=100, duration=100),
        ]
    )
    result = simulate(work, _EvictOnce())
    # a started at 0, lost a pod at 100 (its finish at 300 is void), got it back at 200 and ran 300 s from there.
    assert result.jobs["ml/a"].started == 200
    assert result.jobs["ml/a"].finished == 500


def test_until_stops_the_clock():
    result = simulate(seed(5), LapilliScheduler(), until=900)
    assert result.makespan_s == 900
    assert result.jobs["ml/tf-2"].state == "Running"
    assert result.jobs["ml/tf-3"].state == "Pending"
    assert not result.deadlocked


# --- the command line -----------------------------------------------------------------------------------------


def _run(*args: str):
    return CliRunner().invoke(main, ["simulate", *args])


def test_json_output_has_the_designed_shape():
    result = _run(str(SEED), "--scheduler", "default", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"jobs", "makespan_s", "job_time_s", "gpu_utilization", "unfinished", "gpu_idle_held_s"}
    assert set(out["jobs"]) == {f"ml/tf-{i}" for i in range(1, 6)}
    for entry in out["jobs"].values():
        assert set(entry) == {"submitted", "started", "finished", "state"}
        assert entry["state"] in {"Completed", "Running", "Pending", "Deadlocked"}
    stuck = out["jobs"][out["unfinished"][0]]
    assert stuck["started"] is None and stuck["finished"] is None
    assert isinstance(out["jobs"]["ml/tf-1"]["finished"], int)
    assert 0 < out["gpu_utilization"] <= 1
    assert out["gpu_idle_held_s"] > 0


def test_json_with_both_schedulers_and_several_cases():
    result = _run(str(SEED), "--compare", "--jobs", "1", "--jobs", "2", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"1 job", "2 jobs"}
    assert set(out["2 jobs"]) == {"lapilli", "default"}
    assert set(out["2 jobs"]["default"]["jobs"]) == {"ml/tf-1", "ml/tf-2"}


def test_table_puts_lapilli_and_default_side_by_side():
    result = _run(str(SEED), "--scheduler", "both", "--jobs", "2", "--jobs", "5")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "lapilli" in line)
    assert header.index("lapilli") < header.index("default")
    assert "Deadlocked" in result.output and "summary" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("ml/tf-5"))
    assert "Completed" in row and "Deadlocked" in row


def _error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / "work.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_unknown_kind(tmp_path):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"}}
    line = _error_line(_run(_write(tmp_path, [node("n1"), deployment])))
    assert "document 1 (Deployment ml/web)" in line and "kind:" in line and "unknown kind" in line


def test_malformed_duration(tmp_path):
    bad = job("a", {"w": (1, GPU_WORKER)}, duration="ten minutes")
    line = _error_line(_run(_write(tmp_path, [node("n1"), bad])))
    assert "document 1 (Job ml/a)" in line
    assert "metadata.annotations.sim.lapilli.io/duration" in line and "'ten minutes' is not a duration" in line


@pytest.mark.parametrize(
    ("mutate", "field", "problem"),
    [
        (lambda d: d["metadata"]["annotations"].pop("sim.lapilli.io/duration"), "duration", "missing"),
        (lambda d: d["metadata"]["annotations"].update({"sim.lapilli.io/submit-at": "-1"}), "submit-at", "-1"),
        (lambda d: d["spec"].update(queue="nope"), "spec.queue", "'nope' is not in the workload"),
        (lambda d: d["spec"].update(minAvailable=9), "spec.minAvailable", "greater than"),
        (lambda d: d["spec"]["tasks"][0].update(replicas="x"), "spec.tasks[0].replicas", "integer"),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"].update(
                requests={"cpu": "2x"}
            ),
            "spec.tasks[0].template.spec.containers[].resources.cpu",
            "not a quantity",
        ),
    ],
)
def test_bad_job_fields(tmp_path, mutate, field, problem):
    bad = job("a", {"w": (1, GPU_WORKER)})
    mutate(bad)
    line = _error_line(_run(_write(tmp_path, [node("n1"), bad])))
    assert "document 1 (Job ml/a)" in line and field in line and problem in line


def test_bad_node_quantity_and_missing_file(tmp_path):
    bad = node("n1", cpu="lots")
    line = _error_line(_run(_write(tmp_path, [bad])))
    assert "document 0 (Node n1)" in line and "status.allocatable.cpu" in line
    assert "No such file" in _error_line(_run(str(tmp_path / "absent.yaml")))


def test_bad_until_and_conf(tmp_path):
    assert "--until" in _error_line(_run(str(SEED), "--until", "soon"))
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - {name: overcommit, arguments: {overcommit-factor: lots}}\n")
    line = _error_line(_run(str(SEED), "--conf", str(conf)))
    assert str(conf) in line and "overcommit-factor" in line
