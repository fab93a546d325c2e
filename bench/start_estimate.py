"""How good is `lapilli job why`'s start-time estimate? Measured in the simulator against a lab week's real starts.

    .venv/bin/python bench/start_estimate.py

Replays examples/sim/lab-week.yaml (bench/lab_week.py, fixed seed) with the lab platform's conf. At each job's
submission — when a user would ask — the cluster as the simulation holds it then (Nodes, Queues with their usage
records, Volcano Jobs with their status conditions, pods on their nodes, the finished Jobs) goes through the same
estimate `job why` computes (assembly/why/estimate.py: one forward replay of the engine), and the estimate is compared
with when the job really started later in the simulation. Three ways of knowing a job's run time:
  annotation  every Job carries volcano.sh/expected-duration = its true run time (error from scheduling alone);
  deadline    every Job's pods carry activeDeadlineSeconds = 8h (the platform's limit; an upper bound);
  history     nothing: the median of at least 3 finished jobs of the queue, else unknown.
Prints, for each, the median and p90 absolute error over the jobs that got an estimate (and over those that waited),
and how many stayed unknown. Deterministic: the same numbers on every run (CPU time only; no wall clock involved).
"""

from __future__ import annotations

import copy
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assembly.sim import LapilliScheduler, load_workload, sim_conf, simulate  # noqa: E402
from assembly.sim.lapilli_driver import EPOCH  # noqa: E402
from assembly.sim.state import Cluster  # noqa: E402
from assembly.sim.workload import DURATION  # noqa: E402
from assembly.why.estimate import EXPECTED_DURATION, estimates  # noqa: E402
from bench import lab_week  # noqa: E402
from extender.engine.conf import SchedulerConf  # noqa: E402
from lapilli.meta import key_of  # noqa: E402
from lapilli.times import rfc3339  # noqa: E402

WEEK = ROOT / "examples" / "sim" / "lab-week.yaml"
CONF = ROOT / "examples" / "lab-platform" / "scheduler-conf.yaml"
DEADLINE_S = 8 * 3600
Variant = Callable[[dict[str, Any]], dict[str, Any]]


def annotated(job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["metadata"]["annotations"][EXPECTED_DURATION] = job["metadata"]["annotations"][DURATION]
    return job


def deadline(job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    for task in job["spec"]["tasks"]:
        task["template"]["spec"]["activeDeadlineSeconds"] = DEADLINE_S
    return job


VARIANTS: dict[str, Variant] = {"annotation": annotated, "deadline": deadline, "history": lambda job: job}


class Asking(LapilliScheduler):
    """The lab platform's scheduler; at the first cycle of each submission time it asks for every new job's
    estimated start, from the cluster as it is before that cycle."""

    def __init__(self, conf: SchedulerConf, docs: dict[str, dict[str, Any]], variant: Variant) -> None:
        super().__init__(conf)
        self.docs, self.variant = docs, variant
        self.asked: dict[str, tuple[float, float | None]] = {}  # job -> (asked at, estimated start from then)

    def cycle(self, cluster: Cluster, now: float) -> bool:
        new = [k for k, s in cluster.jobs.items() if s.submitted == now and k not in self.asked]
        if new:
            guesses = estimates(*self._live(cluster, now), self.conf, self.epoch + now)
            for key in new:
                guess = guesses.get(key)
                self.asked[key] = (now, guess.seconds if guess is not None else None)
        return super().cycle(cluster, now)

    def _live(self, cluster: Cluster, now: float) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
        work = cluster.workload
        objects: dict[str, dict[str, dict[str, Any]]] = {
            "Node": {key_of(n): n for n in work.nodes},
            "Queue": {key_of(q): self._queue_document(q) for q in work.queues},
            "PriorityClass": {key_of(p): p for p in work.priority_classes}, "Pod": {}}
        jobs = []
        for key, state in cluster.jobs.items():
            if state.submitted is None:
                continue
            doc = self.variant(self.docs[key])
            doc["metadata"].update(uid=key, creationTimestamp=rfc3339(self.epoch + state.submitted))
            conditions = [{"status": "Pending", "lastTransitionTime": rfc3339(self.epoch + state.submitted)}]
            if state.started is not None:
                conditions.append({"status": "Running", "lastTransitionTime": rfc3339(self.epoch + state.started)})
            phase = "Completed" if state.finished is not None else "Running" if state.started is not None else "Pending"
            if state.finished is not None:
                conditions.append({"status": "Completed", "lastTransitionTime": rfc3339(self.epoch + state.finished)})
            doc["status"] = {"state": {"phase": phase}, "conditions": conditions}
            jobs.append(doc)
        for pod in cluster.pods.values():
            if pod.node is not None:
                objects["Pod"][pod.key] = {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.key,
                                 "ownerReferences": [{"kind": "Job", "uid": pod.job}]},
                    "spec": {**pod.spec, "nodeName": pod.node}, "status": {"phase": "Running"}}
        return objects, jobs


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def measure(variant: str) -> dict[str, Any]:
    raw = [d for d in yaml.safe_load_all(WEEK.read_text()) if d]
    docs = {key_of(d): d for d in raw if d.get("kind") == "Job"}
    work = load_workload(raw)
    scheduler = Asking(sim_conf(CONF.read_text()), docs, VARIANTS[variant])
    result = simulate(work, scheduler)
    errors, waited, unknown = [], [], 0
    for key, (asked, guess) in sorted(scheduler.asked.items()):
        started = result.jobs[key].started
        if guess is None or started is None:
            unknown += 1
            continue
        error = abs(asked + guess - started) / 3600
        errors.append(error)
        if started > asked:
            waited.append(error)
    return {"variant": variant, "jobs": len(scheduler.asked), "estimated": len(errors), "unknown": unknown,
            "median_h": statistics.median(errors) if errors else None, "p90_h": p90(errors) if errors else None,
            "waited": len(waited), "waited_median_h": statistics.median(waited) if waited else None,
            "waited_p90_h": p90(waited) if waited else None}


def main() -> None:
    lab_week.main()
    print("| run times from | jobs | estimated | unknown | median error (h) | p90 error (h) | of which waited | "
          "their median (h) | their p90 (h) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for variant in VARIANTS:
        m = measure(variant)

        def h(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f}"

        print(f"| {m['variant']} | {m['jobs']} | {m['estimated']} | {m['unknown']} | {h(m['median_h'])} | "
              f"{h(m['p90_h'])} | {m['waited']} | {h(m['waited_median_h'])} | {h(m['waited_p90_h'])} |", flush=True)
    print(f"(epoch of the simulated week: {EPOCH.isoformat()})")


if __name__ == "__main__":
    main()
