"""Control-plane numbers: warm start-to-ready of `lapilli dev up`, and how far the simulated kubelet keeps up.

    .venv/bin/python bench/controlplane.py startup [--runs 3] [--nodes 8]
    .venv/bin/python bench/controlplane.py kubelet [--nodes 1000] [--pods 10000] [--rate 100] [--duration 30]

`startup` times `lapilli dev up` (a subprocess, exactly what a user runs) until it exits with the cluster ready,
then `lapilli dev down`. `kubelet` starts a cluster with N simulated nodes and the kubelet as its own process
(as `dev up` runs it), creates P pods already bound round-robin to the nodes (spec.nodeName set, so kube-scheduler
is not what is measured) at RATE pods/s, each annotated to finish after DURATION s, and records for every pod, on
this process's monotonic clock: created (the create request sent) -> seen Running -> seen Succeeded, through a
watch. Start lag = Running - created; finish lag = Succeeded - (Running + DURATION). Results print as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A script in bench/ must never shadow a package it measures (bench/webhook.py once did): drop the script
# directory that Python puts first on sys.path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries  # noqa: E402
from assembly.dev.nodes import node_name  # noqa: E402
from assembly.dev.service import lapilli_argv  # noqa: E402
from lapilli.cluster import Event, Reflector  # noqa: E402
from lapilli.kube import KubeClient  # noqa: E402
from lapilli.kube.resources import PODS  # noqa: E402

NS = "bench"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "min": round(min(values), 3), "p50": pct(values, 0.5), "p95": pct(values, 0.95),
            "p99": pct(values, 0.99), "max": round(max(values), 3)}


def startup(runs: int, nodes: int) -> dict[str, Any]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="lapilli-bench-") as state:
            began = time.monotonic()
            up = subprocess.run(lapilli_argv("dev", "up", "--state-dir", state, "--nodes", str(nodes)),
                                capture_output=True, text=True)
            elapsed = time.monotonic() - began
            subprocess.run(lapilli_argv("dev", "down", "--state-dir", state), capture_output=True, check=True)
            if up.returncode != 0 or not up.stdout.strip().splitlines()[-1].startswith("export KUBECONFIG="):
                raise SystemExit(f"dev up failed:\n{up.stdout}\n{up.stderr}")
            times.append(round(elapsed, 2))
            print(up.stderr.strip().splitlines()[-1], file=sys.stderr)
    return {"nodes": nodes, "runs_s": times, "median_s": statistics.median(times)}


def pod(name: str, node: str, duration: float) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": {"sim.lapilli.io/duration": f"{duration}s"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]},
    }


async def kubelet_load(nodes: int, pods: int, rate: float, duration: float, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lapilli-bench-") as state:
        spec = ClusterSpec(state_dir=Path(state), nodes=nodes, shape=NodeShape(), extender=False, kubelet="process",
                           tie_to_parent=True, kubelet_workers=workers)
        cluster = DevCluster(spec, find_binaries())
        began = time.monotonic()
        info = await cluster.up()
        try:
            result = {"nodes": nodes, "pods": pods, "rate_per_s": rate, "duration_s": duration,
                      "kubelet_workers": workers, "up_with_nodes_s": round(time.monotonic() - began, 1),
                      "kubernetes": info.kubernetes}
            await cluster.ensure_namespace(NS)
            async with KubeClient.from_kubeconfig(cluster.kubeconfig, max_connections=64) as api:
                result |= await drive(api, nodes, pods, rate, duration)
            rss = {}
            for name in ("kube-apiserver", "etcd", "kubelet"):
                pid = json.loads((Path(state) / "pids" / f"{name}.json").read_text())["pid"]
                status = Path(f"/proc/{pid}/status").read_text()
                rss[name] = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS"))) // 1024
            result["rss_mib"] = rss
            # The kubelet's own view, per 30 s window: first sight of a bound pod -> Running written.
            log = (Path(state) / "logs" / "kubelet.log").read_text().splitlines()
            result["kubelet_windows"] = [ln.split("; ")[1] for ln in log if "start lag" in ln]
            return result
        finally:
            await cluster.down()


async def drive(api: KubeClient, nodes: int, pods: int, rate: float, duration: float) -> dict[str, Any]:
    created: dict[str, float] = {}
    running: dict[str, float] = {}
    finished: dict[str, float] = {}
    everyone_done = asyncio.Event()

    def seen(event: Event) -> None:
        name, phase = event.obj["metadata"]["name"], (event.obj.get("status") or {}).get("phase")
        now = time.monotonic()
        if phase == "Running":
            running.setdefault(name, now)
        elif phase == "Succeeded":
            running.setdefault(name, now)
            finished.setdefault(name, now)
            if len(finished) == pods:
                everyone_done.set()

    def slim(obj: dict[str, Any]) -> dict[str, Any]:  # keeps this process's GC pauses out of the numbers
        meta = obj["metadata"]
        return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")},
                "status": {"phase": (obj.get("status") or {}).get("phase")}}

    watcher = Reflector(api, PODS, namespace=NS, handlers=[seen], name="bench-pods", transform=slim)
    watcher.start()
    await watcher.synced.wait()
    gate = asyncio.Semaphore(32)
    t0 = time.monotonic()

    async def create(i: int) -> None:
        if rate > 0:
            await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
        name = f"p-{i:05d}"
        async with gate:
            # Timed from the moment the request leaves: the pod may show up Running before the answer is read.
            created[name] = time.monotonic()
            await api.create(PODS, pod(name, node_name(i % nodes, nodes), duration))

    await asyncio.gather(*(create(i) for i in range(pods)))
    create_s = time.monotonic() - t0
    try:
        await asyncio.wait_for(everyone_done.wait(), timeout=duration + 600)
    finally:
        await watcher.stop()
    start_lag = [running[n] - created[n] for n in created if n in running]
    finish_lag = [finished[n] - running[n] - duration for n in created if n in finished]
    return {
        "created_in_s": round(create_s, 1), "achieved_rate_per_s": round(pods / create_s, 1),
        "start_lag_s": summary(start_lag), "finish_lag_s": summary(finish_lag),
        "all_done_in_s": round(time.monotonic() - t0, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("startup")
    s.add_argument("--runs", type=int, default=3)
    s.add_argument("--nodes", type=int, default=8)
    k = sub.add_parser("kubelet")
    k.add_argument("--nodes", type=int, default=1000)
    k.add_argument("--pods", type=int, default=10_000)
    k.add_argument("--rate", type=float, default=100.0, help="pods created per second (0: as fast as possible)")
    k.add_argument("--duration", type=float, default=30.0, help="seconds each pod runs")
    k.add_argument("--workers", type=int, default=64)
    args = parser.parse_args()
    if args.what == "startup":
        out = startup(args.runs, args.nodes)
    else:
        out = asyncio.run(kubelet_load(args.nodes, args.pods, args.rate, args.duration, args.workers))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
