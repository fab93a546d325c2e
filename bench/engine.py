"""One scheduling session (enqueue + allocate) over a large synthetic cluster.

    .venv/bin/python bench/engine.py [--nodes 5000 --pods 50000 --gang 10 --queues 10 --repeat 3 --distinct-nodes]

Nodes have 64 CPU / 512Gi / 8 GPUs; pods ask 4 CPU / 16Gi / 1 GPU in gangs of `--gang`, spread over `--queues`
queues, so about four fifths of the pods fit. Reports snapshot build time, session time (`run_session`: open,
enqueue, allocate, close, decisions; best and median of `--repeat` runs, wall clock and this process's CPU time,
which a busy machine does not inflate), pods decided per second (every pending pod is decided: bound or left
pending) and peak RSS. The baseline in the same process is a plain Python loop that does one first-fit placement per
pod over the same node arrays, to put the engine's cost next to the cheapest possible per-pod decision.

`--distinct-nodes` gives every node a slightly different memory size, so no two node rows are ever equal and the
engine's per-class memo of row evaluations (which identical nodes in the same state share) never hits.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time
from typing import Any

import numpy as np

from extender.engine.run import open_session, parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
"""


def workload(nodes: int, pods: int, gang: int, queues: int, distinct: bool = False) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(nodes):
        memory = f"{512 * 1024 + i}Mi" if distinct else "512Gi"
        docs.append({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}"},
            "status": {"allocatable": {"cpu": "64", "memory": memory, "nvidia.com/gpu": "8", "pods": "110"}},
        })
    for q in range(queues):
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"q{q}"},
                     "spec": {"weight": 1}, "status": {"state": "Open"}})
    for j in range(pods // gang):
        name = f"job-{j:05d}"
        docs.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": gang, "queue": f"q{j % queues}",
                     "minResources": {"cpu": str(4 * gang), "memory": f"{16 * gang}Gi", "nvidia.com/gpu": str(gang)}},
            "status": {"phase": "Pending"},
        })
        for t in range(gang):
            docs.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-w-{t}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {
                    "cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Pending"},
            })
    return docs


def baseline(nodes: int, pods: int) -> float:
    """First-fit per pod in plain numpy: the floor for a per-pod decision over these node arrays."""
    free = np.tile(np.array([64000.0, 512 * 2**30, 8000.0]), (nodes, 1))
    req = np.array([4000.0, 16 * 2**30, 1000.0])
    start = time.perf_counter()
    for _ in range(pods):
        fits = np.flatnonzero(np.all(free >= req, axis=1))
        if len(fits):
            free[fits[0]] -= req
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--gang", type=int, default=10)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--distinct-nodes", action="store_true")
    args = parser.parse_args()
    docs = workload(args.nodes, args.pods, args.gang, args.queues, args.distinct_nodes)
    conf = parse_scheduler_conf(CONF)
    t0 = time.perf_counter()
    snap = build_snapshot(docs)
    t1 = time.perf_counter()
    ssn_open = open_session(snap, conf)
    t2 = time.perf_counter()
    del ssn_open
    runs: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_session(snap, conf)
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
        gc.collect()  # outside the timing: free the finished session before the next one, as a service would
    base = baseline(args.nodes, args.pods)
    best_wall, best_cpu = min(runs)
    median_wall = statistics.median(wall for wall, _ in runs)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"nodes={args.nodes} pods={args.pods} gang={args.gang} queues={args.queues}"
          f"{' distinct-nodes' if args.distinct_nodes else ''}")
    print(f"snapshot build     {t1 - t0:8.3f} s")
    print(f"session open       {t2 - t1:8.3f} s")
    print(f"session (run_session: open+enqueue+allocate+close+decisions, {args.repeat} runs)")
    print(f"  best wall        {best_wall:8.3f} s  (CPU {best_cpu:.3f} s)")
    print(f"  median wall      {median_wall:8.3f} s")
    print(f"pods bound         {len(result.binds):8d}")
    print(f"pods decided/s     {args.pods / best_wall:8.0f}")
    print(f"peak RSS           {rss_mib:8.0f} MiB")
    print(f"baseline first-fit {base:8.3f} s  (engine best wall/baseline = {best_wall / base:.2f}x)")


if __name__ == "__main__":
    main()
