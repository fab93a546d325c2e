"""A week on the lab platform with and without usage-decayed fair share: waiting time per lab, as a table and a PNG.

    make lab-week        # or: .venv/bin/python bench/fair_share.py  (needs the `bench` extra: matplotlib)

Replays examples/sim/lab-week.yaml (written by bench/lab_week.py, fixed seed) twice through the simulator with
Lapilli's engine: once with the lab platform's conf (examples/lab-platform/scheduler-conf.yaml), once with the same
conf plus the `fairshare` plugin (scheduler-conf-fairshare.yaml: halfLife 168h, GPU-hours). The simulator carries
each queue's decayed usage through simulated time as the service's leader would (assembly/sim/lapilli_driver.py).
Prints the table bench/README.md records and writes bench/fair_share.png: waiting time per lab (mean and p90),
and each lab's decayed usage over the week as the scheduler saw it. Deterministic: same numbers on every run.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assembly.sim import LapilliScheduler, SimResult, load_workload, sim_conf, simulate  # noqa: E402
from assembly.sim.groups import top_level  # noqa: E402
from assembly.sim.workload import Workload  # noqa: E402
from bench import lab_week  # noqa: E402
from lapilli.usage import hours  # noqa: E402

LAB = ROOT / "examples" / "lab-platform"
CONFS = {"without": LAB / "scheduler-conf.yaml", "with fairshare": LAB / "scheduler-conf-fairshare.yaml"}
PICTURE = ROOT / "bench" / "fair_share.png"
GPU = "nvidia.com/gpu"
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class LabWaits:
    lab: str
    jobs: int
    mean_h: float
    median_h: float
    p90_h: float
    max_h: float
    gpu_hours: float


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def waits(result: SimResult, work: Workload) -> list[LabWaits]:
    lab_of = top_level(work.queues)
    per: dict[str, list[float]] = {}
    for key, job in result.jobs.items():
        lab = lab_of.get(result.job_queue[key], result.job_queue[key])
        started = job.started if job.started is not None else result.makespan_s
        per.setdefault(lab, []).append(max(started - (job.submitted or 0.0), 0.0) / HOUR)
    used: dict[str, float] = {}
    for queue, seconds in result.queue_gpu_s.items():
        lab = lab_of.get(queue, queue)
        used[lab] = used.get(lab, 0.0) + seconds / HOUR
    return [LabWaits(lab, len(v), statistics.fmean(v), statistics.median(v), p90(v), max(v), used.get(lab, 0.0))
            for lab, v in sorted(per.items())]


def run() -> tuple[dict[str, list[LabWaits]], list[tuple[float, dict[str, float]]]]:
    lab_week.main()  # (re)writes examples/sim/lab-week.yaml from its fixed seed
    work = load_workload(list(yaml.safe_load_all((ROOT / "examples" / "sim" / "lab-week.yaml").read_text())))
    out: dict[str, list[LabWaits]] = {}
    history: list[tuple[float, dict[str, float]]] = []
    for label, path in CONFS.items():
        scheduler = LapilliScheduler(sim_conf(path.read_text()))
        out[label] = waits(simulate(work, scheduler), work)
        if scheduler.usage_history:
            labs = sorted({lab for lab in top_level(work.queues).values()})
            history = [(t, {lab: hours(GPU, usage.get(lab, {}).get(GPU, 0.0)) for lab in labs})
                       for t, usage in scheduler.usage_history]
    return out, history


def table(results: dict[str, list[LabWaits]]) -> str:
    rows = ["| conf | lab | jobs | mean wait (h) | median (h) | p90 (h) | max (h) | GPU·h used |",
            "|---|---|---|---|---|---|---|---|"]
    for label, labs in results.items():
        for w in labs:
            rows.append(f"| {label} | {w.lab} | {w.jobs} | {w.mean_h:.2f} | {w.median_h:.2f} | {w.p90_h:.2f} | "
                        f"{w.max_h:.2f} | {w.gpu_hours:.0f} |")
    return "\n".join(rows)


def picture(results: dict[str, list[LabWaits]], history: list[tuple[float, dict[str, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, curve) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = list(results)
    labs = [w.lab for w in results[labels[0]]]
    width = 0.8 / (2 * len(labels))
    for i, label in enumerate(labels):
        for j, stat in enumerate(("mean_h", "p90_h")):
            offset = (2 * i + j) * width - 0.4 + width / 2
            values = [getattr(w, stat) for w in results[label]]
            xs = [k + offset for k in range(len(labs))]
            bars.bar(xs, values, width, label=f"{label}: {'mean' if j == 0 else 'p90'}",
                     color=("#9bb", "#377", "#fb9", "#c62")[2 * i + j])
    bars.set_xticks(range(len(labs)), labs)
    bars.set_ylabel("waiting time (hours)")
    bars.set_title("Waiting time per lab, one simulated week")
    bars.legend(fontsize=8)
    if history:
        times = [t / 86400 for t, _ in history]
        for lab in sorted(history[-1][1]):
            curve.plot(times, [h[lab] for _, h in history], label=lab)
    curve.set_xlabel("day of the week")
    curve.set_ylabel("decayed usage (GPU·h, half-life 7d)")
    curve.set_title("What fairshare saw: each lab's decayed usage")
    curve.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=110)


def main() -> None:
    results, history = run()
    print(table(results))
    picture(results, history)
    print(f"picture: {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
