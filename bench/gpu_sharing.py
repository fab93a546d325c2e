"""A lab week with shared GPUs (issue 18): notebooks, small inference servers and LoRA fine-tunes on the lab
platform's 4 nodes × 2 A100-80GB, once asking whole GPUs (`nvidia.com/gpu: 1`, as today) and once asking the GPU
memory they need on a shared card (`volcano.sh/vgpu-number: 1` + `vgpu-memory`, Volcano's deviceshare). A table
and a PNG.

    make gpu-sharing        # or: .venv/bin/python bench/gpu_sharing.py  (needs the `bench` extra: matplotlib)

The week (a fixed seed; `--write-workload` writes both workloads to examples/sim/gpu-sharing-{whole,shared}.yaml):
every working day each of four users (two labs) opens 3–6 notebooks (8–16 GB of GPU memory, 2–8 hours; 0–2 at the
weekend) and starts 1–2 LoRA fine-tunes (32–48 GB, 4–10 hours); each lab starts a small inference server every
working day, up for one or two days (16–24 GB). Jobs
arrive between 08:00 and 20:00. The same jobs, same arrival times and run times in both runs; the scheduler and its
conf are the same (examples/scheduler-conf-vgpu.yaml: binpack, deviceshare binpacking cards), only what a pod asks
for differs.

Prints the table bench/README.md records — jobs served within the week, waits, GPU-hours held and needed, and what
was held idle (a whole card for a 10 GB notebook holds 70 GB idle) — and writes bench/gpu_sharing.png: GPUs held
idle over the week and jobs served, both runs. Deterministic: the same numbers on every run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assembly.sim import LapilliScheduler, SimResult, load_workload, sim_conf, simulate  # noqa: E402

CONF = ROOT / "examples" / "scheduler-conf-vgpu.yaml"
PICTURE = ROOT / "bench" / "gpu_sharing.png"
WORKLOADS = ROOT / "examples" / "sim"
SEED = 18
NODES, CARDS, CARD_MB = 4, 2, 81920
HOUR, DAY = 3600.0, 86400.0
WEEK = 7 * DAY
USERS = (("lab-a", "alice"), ("lab-a", "bob"), ("lab-b", "carol"), ("lab-b", "dave"))
NEED = "sim.lapilli.io/gpu-memory-need"  # MB the job's pod really uses (both runs carry it, for the report)


@dataclass(frozen=True, slots=True)
class Arrival:
    name: str
    lab: str
    kind: str
    at: float
    hours: float
    need_mb: int


def arrivals(rng: random.Random) -> list[Arrival]:
    out: list[Arrival] = []
    for day in range(7):
        weekday = day < 5
        for lab, user in USERS:
            notebooks = rng.randint(3, 6) if weekday else rng.randint(0, 2)
            for n in range(notebooks):
                out.append(Arrival(f"{user}-nb-d{day}-{n}", lab, "notebook", _at(rng, day), rng.uniform(2, 8),
                                   rng.choice((8192, 10240, 12288, 16384))))
            for n in range(rng.randint(1, 2) if weekday else 0):
                out.append(Arrival(f"{user}-lora-d{day}-{n}", lab, "fine-tune", _at(rng, day), rng.uniform(4, 10),
                                   rng.choice((32768, 40960, 49152))))
        for lab in ("lab-a", "lab-b"):
            if weekday:
                out.append(Arrival(f"{lab}-serve-d{day}", lab, "inference", _at(rng, day), rng.choice((24, 48)),
                                   rng.choice((16384, 20480, 24576))))
    return out


def _at(rng: random.Random, day: int) -> float:
    return day * DAY + rng.randrange(8 * 3600, 20 * 3600, 300)


def _node(i: int, shared: bool) -> dict[str, Any]:
    name = f"gpu-{i}"
    alloc: dict[str, str] = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    meta: dict[str, Any] = {"name": name}
    if shared:
        alloc |= {"volcano.sh/vgpu-number": str(CARDS * 10), "volcano.sh/vgpu-memory": str(CARDS * CARD_MB),
                  "volcano.sh/vgpu-cores": str(CARDS * 100)}
        meta["annotations"] = {"volcano.sh/node-vgpu-register": "".join(
            f"GPU-{name}-{c},10,{CARD_MB},NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(CARDS))}
    else:
        alloc["nvidia.com/gpu"] = str(CARDS)
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def _queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}}


def _job(a: Arrival, shared: bool) -> dict[str, Any]:
    gpu = ({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(a.need_mb)} if shared
           else {"nvidia.com/gpu": "1"})
    pod = {"containers": [{"name": a.kind, "image": "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
                           "resources": {"requests": {"cpu": "2", "memory": "8Gi", **gpu}, "limits": gpu}}]}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": a.name, "namespace": a.lab,
                         "annotations": {"sim.lapilli.io/submit-at": str(int(a.at)),
                                         "sim.lapilli.io/duration": f"{int(a.hours * 60)}m", NEED: str(a.need_mb)}},
            "spec": {"schedulerName": "volcano", "queue": a.lab, "minAvailable": 1,
                     "tasks": [{"name": a.kind, "replicas": 1, "template": {"spec": pod}}]}}


def workload(shared: bool) -> list[dict[str, Any]]:
    return [*(_node(i, shared) for i in range(NODES)), _queue("lab-a"), _queue("lab-b"),
            *(_job(a, shared) for a in arrivals(random.Random(SEED)))]


# ---- the week, both ways ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Row:
    label: str
    submitted: int
    served: int  # finished within the week
    waiting: int  # never started within the week
    prompt: int  # started within an hour of being submitted
    mean_wait_h: float
    p90_wait_h: float
    held_gpu_h: float  # GPU-hours the pods held (a whole card each, or their memory's share of one)
    needed_gpu_h: float  # GPU-hours of memory they needed
    idle_gpu_h: float  # held - needed


def _held_share(shared: bool, need_mb: int) -> float:
    """GPUs a running pod holds: a whole card, or its memory's share of one."""
    return need_mb / CARD_MB if shared else 1.0


def row(label: str, result: SimResult, needs: dict[str, int], shared: bool) -> Row:
    waits, held, needed, served = [], 0.0, 0.0, 0
    for key, job in result.jobs.items():
        if job.started is None or job.started > WEEK:
            continue
        waits.append((job.started - (job.submitted or 0.0)) / HOUR)
        end = min(job.finished if job.finished is not None else WEEK, WEEK)
        hours = (end - job.started) / HOUR
        held += hours * _held_share(shared, needs[key])
        needed += hours * needs[key] / CARD_MB
        served += job.finished is not None and job.finished <= WEEK
    waiting = sum(1 for j in result.jobs.values() if j.started is None or j.started > WEEK)
    p90 = statistics.quantiles(waits, n=10)[-1] if len(waits) >= 2 else (waits[0] if waits else 0.0)
    prompt = sum(1 for w in waits if w <= 1.0)
    return Row(label, len(result.jobs), served, waiting, prompt, statistics.fmean(waits) if waits else 0.0, p90,
               held, needed, held - needed)


def table(rows: list[Row]) -> str:
    head = ("| run | jobs | served in the week | still waiting | started within 1 h | mean wait | p90 wait "
            "| GPU·h held | GPU·h needed | held idle |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r.label} | {r.submitted} | {r.served} | {r.waiting} | {r.prompt} | {r.mean_wait_h:.1f} h | "
                     f"{r.p90_wait_h:.1f} h | {r.held_gpu_h:,.0f} | {r.needed_gpu_h:,.0f} | {r.idle_gpu_h:,.0f} "
                     f"({r.idle_gpu_h / r.held_gpu_h * 100 if r.held_gpu_h else 0:.0f}%) |")
    return "\n".join(lines)


def series(result: SimResult, needs: dict[str, int], shared: bool) -> tuple[list[float], list[float], list[int]]:
    """Hourly: GPUs held idle (held − needed) and jobs served so far."""
    hours = [h for h in range(int(WEEK / HOUR) + 1)]
    idle, served = [], []
    for h in hours:
        t = h * HOUR
        running = [(k, j) for k, j in result.jobs.items()
                   if j.started is not None and j.started <= t and (j.finished is None or j.finished > t)]
        idle.append(sum(_held_share(shared, needs[k]) - needs[k] / CARD_MB for k, _ in running))
        served.append(sum(1 for j in result.jobs.values() if j.finished is not None and j.finished <= t))
    return [h / 24 for h in hours], idle, served


def picture(runs: list[tuple[str, SimResult, bool]], needs: dict[str, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for label, result, shared in runs:
        days, idle, served = series(result, needs, shared)
        top.step(days, idle, where="post", label=label)
        bottom.step(days, served, where="post", label=label)
    top.set_ylabel("GPUs held idle")
    top.set_title(f"A lab week on {NODES * CARDS} A100-80GB: notebooks, inference servers, LoRA fine-tunes")
    bottom.set_ylabel("jobs served (cumulative)")
    bottom.set_xlabel("day of the week")
    for axis in (top, bottom):
        axis.grid(alpha=0.3)
        axis.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write-workload", action="store_true", help="also write both workloads to examples/sim/")
    parser.add_argument("--no-picture", action="store_true")
    args = parser.parse_args()
    conf = sim_conf(CONF.read_text())
    needs = {f"{a.lab}/{a.name}": a.need_mb for a in arrivals(random.Random(SEED))}
    runs = []
    for label, shared in (("whole GPUs", False), ("shared GPUs (vGPU)", True)):
        docs = workload(shared)
        if args.write_workload:
            path = WORKLOADS / f"gpu-sharing-{'shared' if shared else 'whole'}.yaml"
            path.write_text(f"# Written by bench/gpu_sharing.py --write-workload (fixed seed): {label}.\n"
                            + yaml.safe_dump_all(docs, sort_keys=False))
        runs.append((label, simulate(load_workload(docs), LapilliScheduler(conf), until=WEEK + DAY), shared))
    print(table([row(label, result, needs, shared) for label, result, shared in runs]))
    if not args.no_picture:
        picture(runs, needs)
        print(f"picture: {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
