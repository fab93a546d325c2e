"""Write examples/sim/lab-week.yaml: a week on the lab GPU platform (examples/lab-platform/) for `lapilli simulate`.

The cluster is the platform's: 4 nodes × 2 GPUs, the queue tree root → lab-a, lab-b → one queue per user, and its
priority classes. Jobs are gangs of 1 or 2 one-GPU pods running 1–8 hours. lab-a's users submit through the
working day, every day; lab-b is quiet early in the week and bursts before a Thursday deadline (its users then
submit deadline runs). The arrivals come from a fixed seed, so the file is the same on every run:

    .venv/bin/python bench/lab_week.py && \\
    .venv/bin/lapilli simulate examples/sim/lab-week.yaml --conf examples/lab-platform/scheduler-conf.yaml \\
        --compare --groups
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab-platform"
OUT = ROOT / "examples" / "sim" / "lab-week.yaml"
HOUR, DAY = 3600, 86400


def _node(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{i}"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _job(name: str, lab: str, user: str, at: int, hours: int, gpus: int, priority: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "trainer", "image": "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
                           "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                                         "limits": {"nvidia.com/gpu": "1"}}}]}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": lab,
                         "annotations": {"sim.lapilli.io/submit-at": str(at),
                                         "sim.lapilli.io/duration": f"{hours}h"}},
            "spec": {"schedulerName": "volcano", "queue": f"{lab}-{user}", "minAvailable": gpus,
                     "priorityClassName": priority,
                     "tasks": [{"name": "worker", "replicas": gpus, "template": {"spec": pod}}]}}


def jobs(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for day in range(7):
        weekday = day < 5
        plans = [("lab-a", u, 3 if weekday else 1) for u in ("alice", "bob")]
        burst = day in (2, 3)  # Wednesday and Thursday: lab-b's deadline
        plans += [("lab-b", u, 4 if burst else 1) for u in ("carol", "dave")]
        for lab, user, count in plans:
            for n in range(count):
                at = day * DAY + rng.randrange(8 * HOUR, 20 * HOUR, 600)
                hours = rng.choice((1, 2, 4, 4, 8))
                gpus = rng.choice((1, 2, 2))
                priority = "lab-deadline" if lab == "lab-b" and burst and n % 2 == 0 else "lab-exploratory"
                out.append(_job(f"{user}-d{day}-{n}", lab, user, at, hours, gpus, priority))
    return out


def main() -> None:
    header = (
        "# A week on the lab GPU platform, written by bench/lab_week.py (fixed seed; see its docstring for the\n"
        "# command). 4 nodes x 2 GPUs, the examples/lab-platform queue tree, 1-2 GPU gangs of 1-8 hours: lab-a\n"
        "# submits every working day, lab-b bursts on Wednesday and Thursday before its deadline.\n"
    )
    docs = [_node(i) for i in range(4)] + list(yaml.safe_load_all((LAB / "queues.yaml").read_text()))
    docs += jobs(random.Random(13))
    OUT.write_text(header + yaml.safe_dump_all(docs, sort_keys=False))


if __name__ == "__main__":
    main()
