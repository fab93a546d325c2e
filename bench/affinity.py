"""The cost of pod affinity and topology spread in a session: the engine benchmark's cluster, with and without terms.

    .venv/bin/python bench/affinity.py [--nodes 5000 --pods 50000 --gang 10 --queues 10 --share 0.1 --repeat 3]

The workload is bench/engine.py's (gangs of `--gang` pods asking 4 CPU / 16Gi / 1 GPU on nodes of 64 CPU / 512Gi /
8 GPUs), every node labelled with its hostname and one of ten zones, every pod with its job's name. In the *terms*
run, a `--share` of the gangs carry terms, half of them "one worker per node" (required anti-affinity to their own
job on `kubernetes.io/hostname`), half an even spread over zones (`maxSkew: 1`, DoNotSchedule); the *plain* run
is the same cluster and pods without terms. Reports each run's best and median session time (`run_session`, wall
clock and this process's CPU time) and the ratio terms / plain (the goal: ≤ 1.5 at 5,000 nodes with 10 % of the
pods carrying terms), and checks the terms run's plan: every anti-affinity gang on distinct nodes, every spread
gang's bound pods within one pod of even over the zones.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine import CONF, workload
from extender.engine.results import Decisions
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import Snapshot, build_snapshot

HOSTNAME = "kubernetes.io/hostname"
JOB = "volcano.sh/job-name"
ZONES = 10


def _terms(kind: str, job: str) -> dict[str, Any]:
    selector = {"matchLabels": {JOB: job}}
    if kind == "anti":
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOSTNAME}]}}}
    return {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]}


def labelled(docs: list[dict[str, Any]], share: float, with_terms: bool) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`docs` with hostname/zone labels on nodes and job labels on pods; with terms for `share` of the gangs.
    Returns the documents and the kind of terms each gang got (job -> "anti" | "spread")."""
    every = max(round(1 / share), 1) if share > 0 else 0
    kinds: dict[str, str] = {}
    jobs = 0
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Node":
            index = int(meta["name"].rsplit("-", 1)[1])
            meta["labels"] = {HOSTNAME: meta["name"], "zone": f"zone-{index % ZONES}"}
        elif doc["kind"] == "PodGroup":
            if every and jobs % every == 0:
                kinds[meta["name"]] = "anti" if (jobs // every) % 2 == 0 else "spread"
            jobs += 1
        elif doc["kind"] == "Pod":
            job = meta["annotations"]["scheduling.k8s.io/group-name"]
            meta["labels"] = {JOB: job}
            if with_terms and job in kinds:
                doc["spec"].update(_terms(kinds[job], job))
    return docs, kinds


def check(snap: Snapshot, result: Decisions, kinds: dict[str, str]) -> tuple[int, int]:
    """Anti-affinity gangs bound on distinct nodes, spread gangs within one pod of even over zones; returns how many
    gangs of each kind were bound."""
    by_job: dict[str, list[str]] = {}
    for key, node in result.binds.items():
        by_job.setdefault(snap.pods[key].group, []).append(node)
    zone = {name: dict(n.labels)["zone"] for name, n in snap.nodes.items()}
    anti = spread = 0
    for job, nodes in by_job.items():
        kind = kinds.get(job)
        if kind == "anti":
            assert len(set(nodes)) == len(nodes), f"{job}: two workers on one node: {nodes}"
            anti += 1
        elif kind == "spread":
            counts = Counter(zone[n] for n in nodes)
            spread_counts = [counts.get(f"zone-{z}", 0) for z in range(ZONES)]
            assert max(spread_counts) - min(spread_counts) <= 1, f"{job}: zones {spread_counts}"
            spread += 1
    return anti, spread


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--gang", type=int, default=10)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--share", type=float, default=0.1, help="share of gangs (and pods) that carry terms")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"nodes={args.nodes} pods={args.pods} gang={args.gang} queues={args.queues} share={args.share}")
    conf = parse_scheduler_conf(CONF)
    snaps: dict[str, Snapshot] = {}
    kinds: dict[str, str] = {}
    for name, with_terms in (("plain", False), ("terms", True)):
        docs, kinds = labelled(workload(args.nodes, args.pods, args.gang, args.queues), args.share, with_terms)
        snaps[name] = build_snapshot(docs)
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "terms": []}
    results: dict[str, Decisions] = {}
    for _ in range(args.repeat):  # alternating, so a change in the machine's load falls on both alike
        for name, snap in snaps.items():
            wall, cpu = time.perf_counter(), time.process_time()
            results[name] = run_session(snap, conf)
            runs[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            gc.collect()  # outside the timing: free the finished session before the next one
    for name, timings in runs.items():
        best_wall, best_cpu = min(timings)
        median = statistics.median(w for w, _ in timings)
        line = (f"{name:6s} best wall {best_wall:7.3f} s (CPU {best_cpu:.3f} s)  median {median:7.3f} s  "
                f"best CPU {min(c for _, c in timings):.3f} s  pods bound {len(results[name].binds)}")
        if name == "terms":
            anti, spread = check(snaps[name], results[name], kinds)
            line += f"  gangs with terms bound: {anti} one-per-node, {spread} zone-spread (plans checked)"
        print(line)
    plain, terms = min(runs["plain"]), min(runs["terms"])
    cpu_ratio = min(c for _, c in runs["terms"]) / min(c for _, c in runs["plain"])
    print(f"ratio terms/plain: best wall {terms[0] / plain[0]:.2f}x  best CPU {cpu_ratio:.2f}x  (goal <= 1.5x)")


if __name__ == "__main__":
    main()
