"""Volcano's published job shapes, scaled to this machine, through the real kube-scheduler (issue 19 item 5).

    .venv/bin/python bench/shapes.py [--nodes 500] [--shapes 2000x1 100x20 4x500 1x2000] [--out FILE]

Volcano's tuning guide measures 10,000 pods as 10,000 Jobs x 1 pod, 500 x 20, 20 x 500 and 1 x 10,000 on an
8-core Kind cluster (https://volcano.sh/en/docs/user-guide/how_to_tune_volcano_performance/). This machine has 2
cores, so each shape here is 2,000 pods — the same four shapes at a fifth of the pods — on NODES simulated nodes (8
GPUs each, the kubelet as its own process, which marks each bound pod Running). Each case gets a fresh dev cluster
(kube-apiserver + kube-scheduler 1.20) and the clock runs from the first create to the last pod seen Running (and
bound) by a watch:

* **Lapilli**, one case per shape: JOBS Volcano Jobs of PODS one-GPU pods each (`minAvailable: PODS`, queue default)
  through the whole service — the webhook admits each Job and pod, the controllers make the PodGroup and pods, the
  extender gang-schedules them beside kube-scheduler;
* **plain kube-scheduler**, single pods (2,000 Pods, no extender configured, no service);
* the **do-nothing extender**, single pods: the same extender entries and wire with no scheduling work (what the
  protocol alone costs here; bench/verbs.py).

Prints one line per case (pods/s to all Running, seconds to all bound and all Running, CPU seconds of every process)
and writes them as JSON (`--out`, default bench/results/shapes.json) for bench/scale_plots.py, which draws them
beside Volcano's published 40-55 pods/s and YuniKorn's 204 pods/s at 2,000 nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A script in bench/ must never shadow a package it measures: drop the script directory Python put first, and
# reach its siblings as the package `bench` from the repository root.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from assembly.dev import ClusterSpec, DevCluster, NodeShape  # noqa: E402
from bench.procstats import cpu_by_role  # noqa: E402
from bench.restart import NS, Counter, create_all  # noqa: E402
from bench.verbs import start_null_extender  # noqa: E402
from lapilli.kube.resources import PODS, VC_JOBS  # noqa: E402

RESULTS = _HERE / "results"
GPU = {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
ANNOTATIONS = {"sim.lapilli.io/duration": "1h"}


def volcano_job(name: str, pods: int) -> dict[str, Any]:
    template = {"metadata": {"annotations": ANNOTATIONS},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": GPU}]}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": pods, "schedulerName": "volcano", "queue": "default",
                     "tasks": [{"name": "t", "replicas": pods, "template": template}]}}


def single_pod(i: int, scheduler: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{i}", "namespace": NS, "annotations": ANNOTATIONS},
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox", "resources": GPU}]}}


def _running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _bound(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


async def case(nodes: int, jobs: int, pods: int, kind: str, timeout_s: float) -> dict[str, Any]:
    """One case on a fresh cluster; `kind` is lapilli, kube-scheduler or do-nothing."""
    total = jobs * pods
    with tempfile.TemporaryDirectory() as tmp:
        null, url = start_null_extender(Path(tmp)) if kind == "do-nothing" else (None, None)
        spec = ClusterSpec(state_dir=Path(tmp), nodes=nodes, shape=NodeShape(cpu="64", memory="512Gi", gpus=8),
                           extender=kind == "lapilli", kubelet="process", tie_to_parent=True, extender_url=url,
                           # As shipped (kube-scheduler beside the service) and as the do-nothing one is served.
                           extender_over_tls=False)
        cluster = DevCluster(spec)
        await cluster.up()
        try:
            api = cluster.client
            assert api is not None
            await cluster.ensure_namespace(NS)
            await asyncio.sleep(3)  # the service's first sessions after its caches synced
            bound, running = Counter(api, _bound), Counter(api, _running)
            await bound.start()
            await running.start()
            cpu_before = cpu_by_role()
            began = time.monotonic()
            if kind == "lapilli":
                await create_all(api, VC_JOBS, [volcano_job(f"j-{j}", pods) for j in range(jobs)])
            else:
                # The do-nothing extender's entries serve the `volcano` profile (default-scheduler pods have a
                # kube-scheduler of their own in the dev cluster).
                scheduler = "volcano" if kind == "do-nothing" else "default-scheduler"
                await create_all(api, PODS, [single_pod(i, scheduler) for i in range(total)])
            created_s = time.monotonic() - began
            done = await running.until(total, timeout_s)
            cpu = {role: round(used - cpu_before.get(role, 0.0), 1) for role, used in cpu_by_role().items()}
            await bound.stop()
            await running.stop()
            last_running = max(running.seen.values(), default=began) - began
            return {"case": kind, "jobs": jobs, "pods_per_job": pods, "pods": total, "all_running": done,
                    "running": len(running.seen), "created_s": round(created_s, 1),
                    "all_bound_s": round(max(bound.seen.values(), default=began) - began, 1),
                    "all_running_s": round(last_running, 1),
                    "pods_per_s": round(len(running.seen) / last_running, 1) if last_running > 0 else None,
                    "cpu_s": cpu}
        finally:
            await cluster.down()
            if null is not None:
                null.terminate()


def parse_shape(text: str) -> tuple[int, int]:
    jobs, _, pods = text.partition("x")
    return int(jobs), int(pods)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--shapes", nargs="+", default=["2000x1", "100x20", "4x500", "1x2000"],
                        help="JOBSxPODS, Lapilli's cases (the baselines run the same number of single pods)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--out", default=str(RESULTS / "shapes.json"))
    args = parser.parse_args()
    shapes = [parse_shape(s) for s in args.shapes]
    total = shapes[0][0] * shapes[0][1]
    cases = [(1, total, "kube-scheduler"), (1, total, "do-nothing"), *((j, p, "lapilli") for j, p in shapes)]
    results = []
    for jobs, pods, kind in cases:
        result = asyncio.run(case(args.nodes, jobs, pods, kind, args.timeout))
        results.append(result)
        label = f"{kind} {jobs}x{pods}" if kind == "lapilli" else f"{kind}, {total} single pods"
        print(f"{label:<40} {result['pods_per_s']} pods/s  bound {result['all_bound_s']} s  running "
              f"{result['all_running_s']} s  ({result['running']}/{result['pods']})  CPU s: "
              + ", ".join(f"{k} {v}" for k, v in sorted(result["cpu_s"].items(), key=lambda kv: -kv[1])), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"nodes": args.nodes, "cases": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
