"""One scheduling session (enqueue + allocate) over a large synthetic cluster.

    .venv/bin/python bench/engine.py [--nodes 5000 --pods 50000 --gang 10 --queues 10]

Nodes have 64 CPU / 512Gi / 8 GPUs; pods ask 4 CPU / 16Gi / 1 GPU in gangs of `--gang`, spread over `--queues`
queues, so about a third of the pods fit. Reports snapshot build time, session time, pods decided per second
(every pending pod is decided: bound or left pending) and peak RSS. The baseline in the same process is a plain
Python loop that does one first-fit placement per pod over the same node arrays, to put the engine's cost next
to the cheapest possible per-pod decision.
"""

from __future__ import annotations

import argparse
import resource
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


def workload(nodes: int, pods: int, gang: int, queues: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(nodes):
        docs.append({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}"},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}},
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
    args = parser.parse_args()
    docs = workload(args.nodes, args.pods, args.gang, args.queues)
    conf = parse_scheduler_conf(CONF)
    t0 = time.perf_counter()
    snap = build_snapshot(docs)
    t1 = time.perf_counter()
    ssn_open = open_session(snap, conf)
    t2 = time.perf_counter()
    del ssn_open
    t3 = time.perf_counter()
    result = run_session(snap, conf)
    t4 = time.perf_counter()
    base = baseline(args.nodes, args.pods)
    session_s = t4 - t3
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"nodes={args.nodes} pods={args.pods} gang={args.gang} queues={args.queues}")
    print(f"snapshot build     {t1 - t0:8.3f} s")
    print(f"session open       {t2 - t1:8.3f} s")
    print(f"session (open+enqueue+allocate+close) {session_s:8.3f} s")
    print(f"pods bound         {len(result.binds):8d}")
    print(f"pods decided/s     {args.pods / session_s:8.0f}")
    print(f"peak RSS           {rss_mib:8.0f} MiB")
    print(f"baseline first-fit {base:8.3f} s  (engine/baseline = {session_s / base:.2f}x)")


if __name__ == "__main__":
    main()
