"""One scheduling session (enqueue + allocate) over a large synthetic cluster.

    .venv/bin/python bench/engine.py [--nodes 5000 --pods 50000 --gang 10 --queues 10 --repeat 3 --distinct-nodes]
    .venv/bin/python bench/engine.py --vgpu [--vgpu-memory 40960] [same options]

Nodes have 64 CPU / 512Gi / 8 GPUs; pods ask 4 CPU / 16Gi / 1 GPU in gangs of `--gang`, spread over `--queues`
queues, so about four fifths of the pods fit. Reports snapshot build time, session time (`run_session`: open,
enqueue, allocate, close, decisions; best and median of `--repeat` runs, wall clock and this process's CPU time,
which a busy machine does not inflate), pods decided per second (every pending pod is decided: bound or left
pending) and peak RSS. The baseline in the same process is a plain Python loop that does one first-fit placement per
pod over the same node arrays, to put the engine's cost next to the cheapest possible per-pod decision.

Each run also prints a digest of the session's decisions (binds in the order made, then the whole `lapilli schedule
-o json` document): run the same command on two trees to check that an engine change leaves its decisions
byte-identical. `--seed S` replaces the uniform cluster by a random one drawn from S (node sizes, gang sizes and
minMember, pod requests, queues, running pods already on the nodes), the same for every tree, for that comparison.

`--distinct-nodes` gives every node a slightly different memory size, so no two node rows are ever equal and the
engine's per-class memo of row evaluations (which identical nodes in the same state share) never hits.

`--vgpu` (issue 18) runs two sessions in one process, alternating: as above (whole GPUs), and with shared GPU
cards. Each node then registers 8 cards of 80 GB (`volcano.sh/node-vgpu-register`, split 10) and advertises the
vGPU totals instead of `nvidia.com/gpu`; each pod asks one card and `--vgpu-memory` MB of it (`volcano.sh/vgpu-number`
/ `vgpu-memory`, 40 GB by default: two pods share a card, so every pod fits where a fifth were left pending with
whole GPUs; 81920 makes each pod take a whole card, the same fill as whole GPUs); the conf adds `deviceshare` with
`deviceshare.VGPUEnable`, so every vGPU pod is placed through the per-card ledgers. It reports both and the ratio of
the best session times, wall and CPU (goal: at most 1.5x).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import resource
import statistics
import time
from typing import Any

import numpy as np

from extender.engine.results import Decisions
from extender.engine.run import open_session, parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
"""


VGPU_CONF = CONF.replace("{name: binpack}]", "{name: binpack},\n"
                         "  {name: deviceshare, arguments: {deviceshare.VGPUEnable: true}}]")
CARDS = 8


def _gpus(vgpu_memory: int | None, count: int) -> dict[str, str]:
    """`count` GPUs: whole (`nvidia.com/gpu`) or cards of which `vgpu_memory` MB each."""
    if vgpu_memory is None:
        return {"nvidia.com/gpu": str(count)}
    return {"volcano.sh/vgpu-number": str(count), "volcano.sh/vgpu-memory": str(vgpu_memory * count)}


def workload(nodes: int, pods: int, gang: int, queues: int, distinct: bool = False,
             vgpu_memory: int | None = None) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        memory = f"{512 * 1024 + i}Mi" if distinct else "512Gi"
        allocatable = {"cpu": "64", "memory": memory, "nvidia.com/gpu": str(CARDS), "pods": "110"}
        metadata: dict[str, Any] = {"name": name}
        if vgpu_memory is not None:
            del allocatable["nvidia.com/gpu"]
            allocatable |= {"volcano.sh/vgpu-number": str(10 * CARDS), "volcano.sh/vgpu-memory": str(81920 * CARDS),
                            "volcano.sh/vgpu-cores": str(100 * CARDS)}
            metadata["annotations"] = {"volcano.sh/node-vgpu-register": "".join(
                f"{name}-gpu{c},10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(CARDS))}
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": metadata,
                     "status": {"allocatable": allocatable}})
    for q in range(queues):
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"q{q}"},
                     "spec": {"weight": 1}, "status": {"state": "Open"}})
    for j in range(pods // gang):
        name = f"job-{j:05d}"
        docs.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": gang, "queue": f"q{j % queues}",
                     "minResources": {"cpu": str(4 * gang), "memory": f"{16 * gang}Gi", **_gpus(vgpu_memory, gang)}},
            "status": {"phase": "Pending"},
        })
        for t in range(gang):
            docs.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-w-{t}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "4", "memory": "16Gi", **_gpus(vgpu_memory, 1)},
                    "limits": _gpus(vgpu_memory, 1)}}]},
                "status": {"phase": "Pending"},
            })
    return docs


def random_workload(nodes: int, pods: int, queues: int, seed: int) -> list[dict[str, Any]]:
    """A random cluster of about `nodes` nodes and `pods` pods (a tenth of them already running), drawn from `seed`."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    for i in range(nodes):
        allocatable = {"cpu": str(rng.choice((16, 32, 64, 96))), "memory": f"{rng.choice((128, 256, 512))}Gi",
                       "nvidia.com/gpu": str(rng.choice((0, 4, 8))), "pods": "110"}
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}"},
                     "status": {"allocatable": allocatable}})
    for q in range(queues):
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"q{q}"},
                     "spec": {"weight": rng.randint(1, 4)}, "status": {"state": "Open"}})
    made, j = 0, 0
    while made < pods:
        name, gang = f"job-{j:05d}", rng.choice((1, 1, 2, 4, 8, 10, 16))
        running = rng.random() < 0.1
        request = {"cpu": str(rng.choice((1, 2, 4, 8))), "memory": f"{rng.choice((2, 8, 16, 32))}Gi"}
        if rng.random() < 0.5:
            request["nvidia.com/gpu"] = "1"
        docs.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "creationTimestamp": f"2026-01-01T00:{j // 60 % 60:02d}:"
                         f"{j % 60:02d}Z"},
            "spec": {"minMember": rng.randint(1, gang), "queue": f"q{rng.randrange(queues)}"},
            "status": {"phase": "Running" if running else "Pending"},
        })
        for t in range(gang):
            pod: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-w-{t}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": request}}]},
                "status": {"phase": "Pending"},
            }
            if running:
                pod["spec"]["nodeName"] = f"node-{rng.randrange(nodes):05d}"
                pod["status"]["phase"] = "Running"
            docs.append(pod)
        made, j = made + gang, j + 1
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


def prepare(docs: list[dict[str, Any]], conf_text: str) -> dict[str, Any]:
    """Snapshot build and session open over `docs`; `run` times the sessions."""
    conf = parse_scheduler_conf(conf_text)
    t0 = time.perf_counter()
    snap = build_snapshot(docs)
    t1 = time.perf_counter()
    ssn_open = open_session(snap, conf)
    t2 = time.perf_counter()
    del ssn_open
    return {"snap": snap, "conf": conf, "build": t1 - t0, "open": t2 - t1, "runs": []}


def run(case: dict[str, Any]) -> None:
    """One session over the case's snapshot, wall and CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_session(case["snap"], case["conf"])
    case["runs"].append((time.perf_counter() - wall, time.process_time() - cpu))
    case["bound"], case["cards"] = len(result.binds), len(result.devices)
    case.setdefault("digests", set()).add(digest(result))
    del result
    gc.collect()  # outside the timing: free the finished session before the next one, as a service would


def digest(result: Decisions) -> str:
    """A digest of the session's decisions: binds in the order they were made (a plan that places the same pods on
    other nodes, or in another order, differs), then the whole `lapilli schedule -o json` document. Compare it
    between trees to check that a change of the engine leaves its decisions byte-identical."""
    text = json.dumps([list(result.binds.items()), result.to_json()], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stats(case: dict[str, Any]) -> dict[str, Any]:
    walls = [wall for wall, _ in case["runs"]]
    return {**case, "best_wall": min(walls), "best_cpu": min(cpu for _, cpu in case["runs"]),
            "median_wall": statistics.median(walls)}


def report(stats: dict[str, Any], pods: int, repeat: int) -> None:
    print(f"snapshot build     {stats['build']:8.3f} s")
    print(f"session open       {stats['open']:8.3f} s")
    print(f"session (run_session: open+enqueue+allocate+close+decisions, {repeat} runs)")
    print(f"  best wall        {stats['best_wall']:8.3f} s  (best CPU {stats['best_cpu']:.3f} s)")
    print(f"  median wall      {stats['median_wall']:8.3f} s")
    print(f"pods bound         {stats['bound']:8d}")
    print(f"decisions digest   {' '.join(sorted(stats['digests']))}")
    if stats["cards"]:
        print(f"pods given cards   {stats['cards']:8d}")
    print(f"pods decided/s     {pods / stats['best_wall']:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--gang", type=int, default=10)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--distinct-nodes", action="store_true")
    parser.add_argument("--seed", type=int, default=None, help="a random cluster drawn from this seed")
    parser.add_argument("--vgpu", action="store_true", help="also the same session with shared GPU cards")
    parser.add_argument("--vgpu-memory", type=int, default=40960, help="MB of a card each vGPU pod asks")
    args = parser.parse_args()
    print(f"nodes={args.nodes} pods={args.pods} gang={args.gang} queues={args.queues}"
          f"{' distinct-nodes' if args.distinct_nodes else ''}{'' if args.seed is None else f' seed={args.seed}'}")
    if args.seed is None:
        docs = workload(args.nodes, args.pods, args.gang, args.queues, args.distinct_nodes)
    else:
        docs = random_workload(args.nodes, args.pods, args.queues, args.seed)
    cases = [prepare(docs, CONF)]
    del docs
    if args.vgpu:
        docs = workload(args.nodes, args.pods, args.gang, args.queues, args.distinct_nodes, args.vgpu_memory)
        cases.append(prepare(docs, VGPU_CONF))
        del docs
    for _ in range(args.repeat):  # the two sessions alternate, so a change of the machine's load touches both
        for case in cases:
            run(case)
    whole = stats(cases[0])
    if args.vgpu:
        print("-- whole GPUs (nvidia.com/gpu: 1 per pod)")
    report(whole, args.pods, args.repeat)
    if args.vgpu:
        shared = stats(cases[1])
        print(f"-- vGPU cards ({CARDS} x 80 GB per node; 1 card and {args.vgpu_memory} MB per pod; deviceshare)")
        report(shared, args.pods, args.repeat)
        print(f"vGPU/whole session  best wall {shared['best_wall'] / whole['best_wall']:.2f}x  "
              f"best CPU {shared['best_cpu'] / whole['best_cpu']:.2f}x")
    del cases
    base = baseline(args.nodes, args.pods)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS           {rss_mib:8.0f} MiB")
    print(f"baseline first-fit {base:8.3f} s  (engine best wall/baseline = {whole['best_wall'] / base:.2f}x)")


if __name__ == "__main__":
    main()
