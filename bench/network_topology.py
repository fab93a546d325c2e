"""Network-topology-aware scheduling in the simulator: Lapilli with network-topology-aware, Lapilli without it, and
kube-scheduler's per-pod default, over one day of training gangs on a two-spine cluster. A table and a PNG.

    make topology-sim        # or: .venv/bin/python bench/network_topology.py  (needs the `bench` extra: matplotlib)

The cluster (examples/sim/network-topology.yaml, written by `--write-workload` from a fixed seed): 2 spines × 4
leaves × 4 nodes of 8 GPUs (256 GPUs), as HyperNodes leaf-<s>-<l> (tier 1) and spine-<s> (tier 2). The jobs: 96
gangs of 8-GPU pods (one node each) arriving over 12 hours — 2 or 4 pods (`networkTopology: hard, tier 1`: one leaf),
8 pods (hard, tier 2: one spine) and 16 pods (soft) — and CPU-only data jobs between them that leave nodes unevenly
busy. The cost model is `sim.lapilli.io/tier-penalty: 0.25`: a gang runs 25% longer for each HyperNode tier its pods
span beyond one leaf (two leaves of a spine: +25%; both spines: +50%), what a ring all-reduce over a slower,
oversubscribed link costs in step time.

Prints the table bench/README.md records (makespan, mean job completion and wait, the share of gangs that kept to
one leaf, mean tiers spanned, GPU-hours lost to the penalty) and writes bench/network_topology.png. Deterministic:
the same numbers on every run.
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assembly.sim import DefaultScheduler, LapilliScheduler, SimResult, load_workload, sim_conf, simulate  # noqa: E402
from assembly.sim.workload import Workload, gpus  # noqa: E402

WORKLOAD = ROOT / "examples" / "sim" / "network-topology.yaml"
CONF = ROOT / "examples" / "scheduler-conf-network-topology.yaml"
PICTURE = ROOT / "bench" / "network_topology.png"
SEED = 17
SPINES, LEAVES, NODES, GPUS = 2, 4, 4, 8
PENALTY = 0.25
HOUR = 3600.0


# ---- the workload -------------------------------------------------------------------------------------------------
def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(GPUS), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": "leaf" if tier == 1 else "spine",
                     "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


def _job(name: str, at: float, minutes: int, pods: int, pod_gpus: int, cpu: int,
         topology: dict[str, Any] | None) -> dict[str, Any]:
    requests = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", **({"nvidia.com/gpu": str(pod_gpus)} if pod_gpus else {})}
    container = {"name": "trainer", "image": "pytorch", "resources": {"requests": requests, "limits": requests}}
    spec: dict[str, Any] = {"minAvailable": pods, "schedulerName": "volcano", "queue": "default",
                            "tasks": [{"name": "worker", "replicas": pods,
                                       "template": {"spec": {"containers": [container]}}}]}
    if topology is not None:
        spec["networkTopology"] = topology
    annotations = {"sim.lapilli.io/submit-at": f"{at:.0f}", "sim.lapilli.io/duration": f"{minutes}m"}
    if pod_gpus:
        annotations["sim.lapilli.io/tier-penalty"] = str(PENALTY)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations}, "spec": spec}


def workload_documents(seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    spines = []
    for s in range(SPINES):
        leaves = []
        for leaf in range(LEAVES):
            names = [f"node-{s}{leaf}{n}" for n in range(NODES)]
            docs += [_node(n) for n in names]
            leaves.append(f"leaf-{s}-{leaf}")
            docs.append(_hypernode(leaves[-1], 1, "Node", names))
        spines.append(f"spine-{s}")
        docs.append(_hypernode(spines[-1], 2, "HyperNode", leaves))
    shapes = [(2, {"mode": "hard", "highestTierAllowed": 1})] * 4 + [(4, {"mode": "hard", "highestTierAllowed": 1})] * 3
    shapes += [(8, {"mode": "hard", "highestTierAllowed": 2})] * 2 + [(16, {"mode": "soft"})]
    at = 0.0
    for i in range(96):
        at += rng.expovariate(1 / 450)  # one gang every 7.5 minutes on average
        pods, topology = rng.choice(shapes)
        docs.append(_job(f"train-{i:02d}", at, rng.choice([30, 45, 60, 90, 120]), pods, GPUS, 16, topology))
        if rng.random() < 0.5:  # a CPU-only data job beside it: nodes unevenly busy, as on a real cluster
            docs.append(_job(f"prep-{i:02d}", at, rng.choice([20, 40, 80]), rng.randint(1, 6), 0,
                             rng.choice([8, 16, 24]), None))
    return docs


def write_workload() -> None:
    header = ("# One day of training gangs on 2 spines × 4 leaves × 4 nodes of 8 GPUs, HyperNodes included: the\n"
              "# topology scenario of bench/network_topology.py (which writes this file: --write-workload).\n"
              "#\n#   lapilli simulate examples/sim/network-topology.yaml "
              "--conf examples/scheduler-conf-network-topology.yaml\n")
    WORKLOAD.write_text(header + yaml.safe_dump_all(workload_documents(), sort_keys=False))


# ---- the comparison -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Row:
    scheduler: str
    makespan_h: float
    jct_h: float  # mean job completion (finished - submitted) of the gangs
    wait_h: float  # mean wait (started - submitted) of the gangs
    one_leaf: float  # share of multi-pod gangs that ran under one leaf
    span: float  # mean tiers spanned beyond one leaf
    lost_gpu_h: float  # GPU-hours added by the tier penalty
    unfinished: int


def summary(name: str, result: SimResult, work: Workload) -> Row:
    jobs = {j.key: j for j in work.jobs}
    gangs = [(key, out) for key, out in result.jobs.items() if any(gpus(p.request) for p in jobs[key].pods)]
    done = [(k, o) for k, o in gangs if o.finished is not None and o.started is not None]
    jct = [((o.finished or 0) - (o.submitted or 0)) / HOUR for _, o in done]
    wait = [((o.started or 0) - (o.submitted or 0)) / HOUR for _, o in done]
    spans = [o.span or 0 for k, o in done if len(jobs[k].pods) > 1]
    lost = sum(jobs[k].duration * jobs[k].tier_penalty * (o.span or 0) * sum(gpus(p.request) for p in jobs[k].pods)
               for k, o in done) / HOUR
    return Row(name, result.makespan_s / HOUR, statistics.fmean(jct), statistics.fmean(wait),
               sum(1 for s in spans if s == 0) / len(spans), statistics.fmean(spans), lost,
               len([1 for _, o in gangs if o.finished is None]))


def run() -> tuple[list[Row], dict[str, list[int]]]:
    work = load_workload(list(yaml.safe_load_all(WORKLOAD.read_text())))
    schedulers: dict[str, Any] = {
        "lapilli + network-topology-aware": LapilliScheduler(sim_conf(CONF.read_text())),
        "lapilli without the plugin": LapilliScheduler(sim_conf()),
        "kube-scheduler (default)": DefaultScheduler(),
    }
    rows, spans = [], {}
    for name, scheduler in schedulers.items():
        result = simulate(work, scheduler)
        rows.append(summary(name, result, work))
        multi = {j.key for j in work.jobs if len(j.pods) > 1 and any(gpus(p.request) for p in j.pods)}
        spans[name] = [o.span or 0 for k, o in result.jobs.items() if k in multi and o.started is not None]
    return rows, spans


def table(rows: list[Row]) -> str:
    head = ("| scheduler | makespan (h) | mean JCT (h) | mean wait (h) | gangs in one leaf | mean tiers spanned "
            "| GPU-h lost to the penalty | unfinished |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r.scheduler} | {r.makespan_h:.2f} | {r.jct_h:.2f} | {r.wait_h:.2f} | {r.one_leaf:.0%} | "
                     f"{r.span:.2f} | {r.lost_gpu_h:.0f} | {r.unfinished} |")
    return "\n".join(lines)


def picture(rows: list[Row], spans: dict[str, list[int]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (where, cost) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = ["one leaf", "one spine", "both spines"]
    width = 0.8 / len(spans)
    for i, (name, values) in enumerate(spans.items()):
        counts = [sum(1 for v in values if v == tier) for tier in range(3)]
        where.bar([x + i * width for x in range(3)], counts, width, label=name)
    where.set_xticks([x + width * (len(spans) - 1) / 2 for x in range(3)], labels)
    where.set_ylabel("multi-pod gangs")
    where.set_title("Where each gang's pods ran")
    where.legend(fontsize=8)
    names = [r.scheduler.replace(" + ", "\n+ ").replace(" (", "\n(").replace(" without", "\nwithout") for r in rows]
    cost.bar(names, [r.jct_h for r in rows], color=["tab:blue", "tab:orange", "tab:green"])
    for x, r in enumerate(rows):
        cost.text(x, r.jct_h, f"{r.jct_h:.2f} h\n{r.lost_gpu_h:.0f} GPU-h lost", ha="center", va="bottom", fontsize=8)
    cost.set_ylabel("mean job completion time (h)")
    cost.set_title(f"Cost model: +{PENALTY:.0%} run time per tier spanned")
    cost.margins(y=0.2)
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=110)


def main() -> None:
    if "--write-workload" in sys.argv:
        write_workload()
    rows, spans = run()
    print(table(rows))
    picture(rows, spans)
    print(f"\nwrote {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
