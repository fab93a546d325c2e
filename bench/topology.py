"""One scheduling session with 500 network-topology gangs pending on 5,000 nodes, against the same session without.

    .venv/bin/python bench/topology.py [--nodes 5000 --gangs 500 --spines 8 --leaves 16 --repeat 3]

The cluster: `--nodes` nodes of 64 CPU / 512Gi / 8 GPUs in a 3-tier HyperNode tree — `--spines` spines of
`--leaves` leaves each (tier 1 leaves of about nodes / (spines × leaves) nodes, tier 2 spines, one tier-3 HyperNode
over them) — a tenth of the nodes already busy with running pods. Pending: `--gangs` gangs of 8-GPU pods in four
shapes (4 pods hard tier 1, 8 pods hard tier 1, 16 pods hard tier 2, 24 pods soft), about two thirds of which fit.

Three sessions over the same nodes, pods and conf shape (Volcano's default conf, enqueue + allocate):

* `topology` — the PodGroups carry their networkTopology, the conf has network-topology-aware;
* `flat, plugin on` — the same PodGroups without networkTopology, same HyperNodes and conf (pods without a topology
  get the plugin's HyperNode binpack);
* `flat, no plugin` — no networkTopology, no HyperNodes, no plugin: the engine as it was.

Reports each session's time (best and median of `--repeat`; wall clock and this process's CPU time, which a busy
machine does not inflate), the pods it bound and the ratio of `topology` to each flat session (goal ≤ 1.5×).
`--profile` prints the top of a cProfile of one topology session instead.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from extender.engine.run import parse_scheduler_conf, run_session  # noqa: E402
from extender.engine.snapshot import Snapshot, build_snapshot  # noqa: E402

BASE = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}"""
SHAPES = [(4, {"mode": "hard", "highestTierAllowed": 1}), (8, {"mode": "hard", "highestTierAllowed": 1}),
          (16, {"mode": "hard", "highestTierAllowed": 2}), (24, {"mode": "soft"})]


def conf(plugin: bool) -> str:
    return BASE + (", {name: network-topology-aware}]\n" if plugin else "]\n")


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    selected = [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": selected}}


def _pod(name: str, group: str, node: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {
            "cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}}}]},
        "status": {"phase": "Pending"},
    }
    if node is not None:
        doc["spec"]["nodeName"], doc["status"]["phase"] = node, "Running"
    return doc


def _podgroup(name: str, size: int, topology: dict[str, Any] | None, phase: str = "Inqueue") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": size, "queue": "default",
                            "minResources": {"cpu": str(32 * size), "memory": f"{256 * size}Gi",
                                             "nvidia.com/gpu": str(8 * size)}}
    if topology is not None:
        spec["networkTopology"] = topology
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"}, "spec": spec, "status": {"phase": phase}}


def documents(nodes: int, gangs: int, spines: int, leaves: int, topology: bool, hypernodes: bool) -> list[Any]:
    names = [f"node-{i:05d}" for i in range(nodes)]
    docs: list[Any] = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8",
                                                   "pods": "110"}}} for n in names]
    docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                 "spec": {"weight": 1}, "status": {"state": "Open"}})
    if hypernodes:
        count = spines * leaves
        leaf_names = [f"leaf-{i:03d}" for i in range(count)]
        for i, leaf in enumerate(leaf_names):
            docs.append(_hypernode(leaf, 1, "Node", names[i::count]))
        spine_names = [f"spine-{s}" for s in range(spines)]
        for s, spine in enumerate(spine_names):
            docs.append(_hypernode(spine, 2, "HyperNode", leaf_names[s * leaves:(s + 1) * leaves]))
        docs.append(_hypernode("cluster", 3, "HyperNode", spine_names))
    docs.append(_podgroup("busy", 1, None, phase="Running"))
    docs += [_pod(f"busy-{i:05d}", "busy", names[i]) for i in range(0, nodes, 10)]  # a tenth of the nodes
    for j in range(gangs):
        size, shape = SHAPES[j % len(SHAPES)]
        name = f"gang-{j:04d}"
        docs.append(_podgroup(name, size, shape if topology else None))
        docs += [_pod(f"{name}-w-{t}", name) for t in range(size)]
    return docs


def timed(snap: Snapshot, text: str, repeat: int) -> tuple[list[float], list[float], int]:
    conf = parse_scheduler_conf(text)
    walls, cpus, binds = [], [], 0
    for _ in range(repeat):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_session(snap, conf)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        binds = len(result.binds)
    return walls, cpus, binds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--spines", type=int, default=8)
    parser.add_argument("--leaves", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    shape = (args.nodes, args.gangs, args.spines, args.leaves)
    cases = {
        "topology": (build_snapshot(documents(*shape, topology=True, hypernodes=True)), conf(True)),
        "flat, plugin on": (build_snapshot(documents(*shape, topology=False, hypernodes=True)), conf(True)),
        "flat, no plugin": (build_snapshot(documents(*shape, topology=False, hypernodes=False)), conf(False)),
    }
    if args.profile:
        snap, text = cases["topology"]
        run_session(snap, parse_scheduler_conf(text))  # the tree cache warm, as every session after the first
        profile = cProfile.Profile()
        profile.runcall(run_session, snap, parse_scheduler_conf(text))
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        return
    print(f"{args.nodes} nodes, {args.spines} spines x {args.leaves} leaves, {args.gangs} gangs pending "
          f"({sum(SHAPES[j % len(SHAPES)][0] for j in range(args.gangs))} pods), best/median of {args.repeat}")
    results = {name: timed(snap, text, args.repeat) for name, (snap, text) in cases.items()}
    print("| session | wall best (s) | wall median (s) | CPU best (s) | pods bound |")
    print("|---|---|---|---|---|")
    for name, (walls, cpus, binds) in results.items():
        print(f"| {name} | {min(walls):.3f} | {statistics.median(walls):.3f} | {min(cpus):.3f} | {binds} |")
    topo = min(results["topology"][1])
    for name in ("flat, plugin on", "flat, no plugin"):
        print(f"topology / {name}: {topo / min(results[name][1]):.2f}x (CPU, best)")


if __name__ == "__main__":
    main()
