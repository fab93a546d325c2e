"""Job controller numbers: `kubectl create` of an N-pod gang Job to all pods Running, and pods created per second.

    .venv/bin/python bench/job_startup.py [--pods 100] [--runs 3] [--nodes 8]

Starts a dev cluster exactly as `lapilli dev up` does (kube-apiserver, kube-scheduler with the extender, `lapilli
serve` with the webhook, extender and controllers as one process, the simulated kubelet as another), then per run
creates a Volcano Job of one task with N replicas and minAvailable N (one gang) with `kubectl create -f` and
follows it through watches, stamping every transition on this process's monotonic clock from the moment kubectl
was started: PodGroup created, PodGroup Inqueue (the extender's enqueue), each pod created (its ADDED event),
bound (nodeName), Running, and the Job Running. Pods created per second = (N - 1) / (last ADDED - first ADDED):
the controller's own pace once it starts, including the pod admission webhook round trip for every pod.
Results print as JSON.
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

# Scripts in bench/ are named like the packages they measure; the script directory that Python puts first on
# sys.path must not shadow them (bench/job_startup.py vs the `controller` package).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries  # noqa: E402
from lapilli.kube import KubeClient  # noqa: E402
from lapilli.kube.resources import PODGROUPS, PODS, VC_JOBS, Resource  # noqa: E402

NS = "bench-controller"


def job_manifest(name: str, pods: int) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
        "spec": {"minAvailable": pods, "schedulerName": "volcano", "queue": "default", "plugins": {"env": []},
                 "tasks": [{"name": "worker", "replicas": pods,
                            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}]},
    }


class Timeline:
    """First time (monotonic, relative to `t0`) each thing was seen."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.marks: dict[str, float] = {}

    def mark(self, what: str) -> None:
        self.marks.setdefault(what, round(time.monotonic() - self.t0, 3))

    def pod(self, obj: dict[str, Any]) -> None:
        name, now = obj["metadata"]["name"], round(time.monotonic() - self.t0, 3)
        self.added.setdefault(name, now)
        if (obj.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(name, now)
        if (obj.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(name, now)


async def follow(client: KubeClient, res: Resource, on_event: Any, stop: asyncio.Event) -> None:
    listed = await client.list(res, NS)
    for obj in listed.items:
        on_event(obj)
    version = listed.resource_version
    while not stop.is_set():
        async for event in client.watch(res, NS, resource_version=version, timeout_seconds=60):
            version = event.resource_version or version
            if event.type in ("ADDED", "MODIFIED"):
                on_event(event.object)
            if stop.is_set():
                return


async def one_run(cluster: DevCluster, client: KubeClient, name: str, pods: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(job_manifest(name, pods)))
    stop = asyncio.Event()
    timeline = Timeline(time.monotonic())

    def on_pod(obj: dict[str, Any]) -> None:
        if (obj["metadata"].get("labels") or {}).get("volcano.sh/job-name") == name:
            timeline.pod(obj)
            if len(timeline.running) == pods:
                timeline.mark("all_running")
                if "job_running" in timeline.marks:
                    stop.set()

    def on_pg(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"].startswith(f"{name}-"):
            timeline.mark("podgroup_created")
            if (obj.get("status") or {}).get("phase") == "Inqueue":
                timeline.mark("podgroup_inqueue")

    def on_job(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == name and ((obj.get("status") or {}).get("state") or {}).get("phase") == "Running":
            timeline.mark("job_running")
            if "all_running" in timeline.marks:
                stop.set()

    watchers = [asyncio.create_task(follow(client, res, fn, stop))
                for res, fn in ((PODS, on_pod), (PODGROUPS, on_pg), (VC_JOBS, on_job))]
    await asyncio.sleep(0.5)  # watches established before the clock starts
    timeline.t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "create", "-f", str(path), env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await proc.wait()
    timeline.mark("kubectl_returned")
    try:
        await asyncio.wait_for(stop.wait(), 120)
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    created = sorted(timeline.added.values())
    rate = (len(created) - 1) / (created[-1] - created[0]) if len(created) > 1 and created[-1] > created[0] else None
    await client.delete(VC_JOBS, name, NS)
    return {
        **timeline.marks,
        "first_pod_created": created[0], "last_pod_created": created[-1],
        "all_bound": max(timeline.bound.values()), "pods_created_per_s": round(rate, 1) if rate else None,
    }


async def main(pods: int, runs: int, nodes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lapilli-bench-") as state:
        spec = ClusterSpec(state_dir=Path(state), nodes=nodes, shape=NodeShape(), kubelet="process", extender=True)
        cluster = DevCluster(spec, find_binaries())
        await cluster.up()
        try:
            await cluster.ensure_namespace(NS)
            assert cluster.client is not None
            results = []
            for i in range(runs):
                results.append(await one_run(cluster, cluster.client, f"gang-{i}", pods, Path(state)))
                print(json.dumps(results[-1]), file=sys.stderr)
                await asyncio.sleep(3)  # the previous gang's pods drain
        finally:
            await cluster.down()
    keys = [k for k in results[0] if all(r.get(k) is not None for r in results)]
    return {"pods": pods, "nodes": nodes, "runs": results,
            "median": {k: statistics.median(r[k] for r in results) for k in keys}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.pods, args.runs, args.nodes)), indent=2))
