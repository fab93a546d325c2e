"""What one start-time estimate costs: the forward replay the dashboard and `lapilli job why` run (issue 21).

    .venv/bin/python bench/estimate_cost.py [--nodes 500 2000 --repeat 3 --conf FILE]

The cluster: `--nodes` nodes of 64 CPU / 512Gi / 8 GPUs under eight equal queues, about 95 % of the GPUs held by
running Volcano Jobs (gangs of 1, 2, 4 or 8 one-GPU pods, each with a `volcano.sh/expected-duration` of 1–24 h and
started up to that long ago, its pods Running on their nodes), waiting Jobs asking for another 15 % of the GPUs (the
job controller's Pending pods), and three finished Jobs per queue (the history). Fixed seed. For each size it prints
the CPU time (`time.process_time`, which load on a shared machine does not inflate) of `estimates()` — everything
one dashboard refresh or one `job why` spends on the estimate — as the best and median of `--repeat` runs, the
number of replayed jobs and how many got a start. Without `--conf`, Volcano's default conf (the dashboard's without
a conf).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assembly.why.estimate import EXPECTED_DURATION, estimates  # noqa: E402
from extender.engine.conf import SchedulerConf  # noqa: E402
from extender.engine.run import parse_scheduler_conf  # noqa: E402
from lapilli.times import rfc3339  # noqa: E402

NOW = 1_780_000_000.0  # a fixed wall clock: the replay's answers must not depend on when the bench runs
GPUS_PER_NODE = 8
QUEUES = 8
HOUR = 3600


def _job(name: str, queue: str, pods: int, hours: int, phase: str, conditions: list[dict[str, str]],
         created: float) -> dict[str, Any]:
    container = {"name": "trainer", "image": "trainer",
                 "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}}
    template = {"spec": {"containers": [container]}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": queue, "uid": f"uid-{name}", "creationTimestamp": rfc3339(created),
                         "annotations": {EXPECTED_DURATION: f"{hours}h"}},
            "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": pods,
                     "tasks": [{"name": "worker", "replicas": pods, "template": template}]},
            "status": {"state": {"phase": phase}, "conditions": conditions}}


def _pod(job: dict[str, Any], i: int, node: str | None) -> dict[str, Any]:
    meta = job["metadata"]
    spec = dict(job["spec"]["tasks"][0]["template"]["spec"])
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-worker-{i}", "namespace": meta["namespace"],
                         "uid": f"{meta['uid']}-{i}", "ownerReferences": [{"kind": "Job", "uid": meta["uid"]}]},
            "spec": spec, "status": {"phase": "Running" if node is not None else "Pending"}}


def cluster(nodes: int, seed: int = 7) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]]]:
    """(the why view's objects by kind and key, the Volcano Jobs) of a busy cluster of `nodes` nodes."""
    rng = random.Random(seed)
    objects: dict[str, dict[str, dict[str, Any]]] = {"Node": {}, "Queue": {}, "PriorityClass": {}, "Pod": {}}
    for i in range(nodes):
        name = f"node-{i:05d}"
        objects["Node"][name] = {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(GPUS_PER_NODE),
                                       "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    queues = [f"q{q}" for q in range(QUEUES)]
    for q in queues:
        objects["Queue"][q] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
                               "spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}}
    jobs: list[dict[str, Any]] = []
    free = [GPUS_PER_NODE] * nodes
    node = 0
    held, target = 0, int(0.95 * nodes * GPUS_PER_NODE)
    while held < target:
        pods, hours = rng.choice((1, 2, 2, 4, 8)), rng.randint(1, 24)
        started = NOW - rng.uniform(0, hours * HOUR)
        job = _job(f"run-{len(jobs):05d}", queues[len(jobs) % QUEUES], pods, hours, "Running",
                   [{"status": "Running", "lastTransitionTime": rfc3339(started)}], started - 60)
        jobs.append(job)
        for i in range(pods):
            while free[node] == 0:
                node += 1
            free[node] -= 1
            pod = _pod(job, i, f"node-{node:05d}")
            objects["Pod"][f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
        held += pods
    waiting, target = 0, int(0.15 * nodes * GPUS_PER_NODE)
    while waiting < target:
        pods, hours = rng.choice((1, 2, 2, 4, 8)), rng.randint(1, 24)
        job = _job(f"wait-{waiting:05d}", queues[waiting % QUEUES], pods, hours, "Pending", [],
                   NOW - rng.uniform(0, 2 * HOUR))
        jobs.append(job)
        for i in range(pods):
            pod = _pod(job, i, None)
            objects["Pod"][f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
        waiting += pods
    for q in queues:
        for n in range(3):
            end = NOW - (n + 1) * 6 * HOUR
            jobs.append(_job(f"done-{q}-{n}", q, 1, 2, "Completed", [
                {"status": "Running", "lastTransitionTime": rfc3339(end - (2 + n) * HOUR)},
                {"status": "Completed", "lastTransitionTime": rfc3339(end)}], end - 3 * HOUR))
    return objects, jobs


def measure(nodes: int, conf: SchedulerConf, repeat: int) -> dict[str, Any]:
    objects, jobs = cluster(nodes)
    times, answers = [], {}
    for _ in range(repeat):
        start = time.process_time()
        answers = estimates(objects, jobs, conf, NOW)
        times.append(time.process_time() - start)
    started = sum(1 for e in answers.values() if e.seconds is not None)
    return {"nodes": nodes, "jobs": len(answers), "pods": len(objects["Pod"]), "started": started,
            "best_s": min(times), "median_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--conf", type=Path, help="scheduler conf (Volcano's format); default: Volcano's default")
    args = parser.parse_args()
    conf = parse_scheduler_conf(args.conf.read_text() if args.conf else None)
    print("| nodes | replayed jobs | pods | with a start | CPU best (s) | CPU median (s) |")
    print("|---|---|---|---|---|---|")
    for nodes in args.nodes:
        m = measure(nodes, conf, args.repeat)
        print(f"| {m['nodes']:,} | {m['jobs']:,} | {m['pods']:,} | {m['started']:,} | {m['best_s']:.2f} | "
              f"{m['median_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
