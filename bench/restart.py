"""Restart recovery at scale: how long a restarted `lapilli serve` takes to be synced and to bind again.

    .venv/bin/python bench/restart.py [--nodes 1000] [--running 8000] [--gangs 500] [--gang-size 4]

Starts a dev cluster of N simulated nodes (8 GPUs each, the kubelet as its own process), creates RUNNING pods
already bound round-robin (0.1 CPU, no GPU, running for an hour) and GANGS PodGroups, stops the service (and
its supervisor), creates GANGS x GANG_SIZE one-GPU gang pods of `volcano` (kube-scheduler meets no extender and
sets them aside), then starts the service again and records on this process's monotonic clock, from the spawn:
the service's /readyz answering 200 (its caches synced), the first gang pod bound, and every gang pod bound.
Results print as JSON. Volcano's users report 8 minutes to recover at 5,000 nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A script in bench/ must never shadow a package it measures: drop the script directory from sys.path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import aiohttp  # noqa: E402

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries, procs  # noqa: E402
from assembly.dev.nodes import node_name  # noqa: E402
from lapilli.kube import KubeClient  # noqa: E402
from lapilli.kube.resources import PODGROUPS, PODS  # noqa: E402

NS = "bench"
GROUP = "scheduling.k8s.io/group-name"


def running_pod(i: int, nodes: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"run-{i}", "namespace": NS, "annotations": {"sim.lapilli.io/duration": "1h"}},
            "spec": {"nodeName": node_name(i % nodes, nodes), "restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}


def podgroup(g: int, size: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"gang-{g}", "namespace": NS},
            "spec": {"minMember": size, "queue": "default", "minResources": {"nvidia.com/gpu": str(size)}}}


def gang_pod(g: int, i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"gang-{g}-{i}", "namespace": NS,
                         "annotations": {GROUP: f"gang-{g}", "sim.lapilli.io/duration": "1h"}},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                                                "limits": {"nvidia.com/gpu": "1"}}}]}}


async def create_all(api: KubeClient, res: Any, objs: list[dict[str, Any]], concurrency: int = 64) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            await api.create(res, obj, NS)

    await asyncio.gather(*(one(o) for o in objs))


async def readyz(url: str) -> bool:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http, \
                http.get(url, ssl=insecure) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


async def bound_gang_pods(api: KubeClient) -> int:
    pods = (await api.list(PODS, NS, label_selector=None)).items
    return sum(1 for p in pods if p["metadata"]["name"].startswith("gang-") and p["spec"].get("nodeName"))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="lapilli-restart-"))
    cluster = DevCluster(ClusterSpec(state_dir=state, nodes=args.nodes, shape=NodeShape(gpus=8), extender=True,
                                     kubelet="process"), find_binaries())
    began = time.monotonic()
    await cluster.up()
    try:
        api = cluster.client
        assert api is not None and cluster.info is not None
        await cluster.ensure_namespace(NS)
        await create_all(api, PODS, [running_pod(i, args.nodes) for i in range(args.running)])
        await create_all(api, PODGROUPS, [podgroup(g, args.gang_size) for g in range(args.gangs)])
        setup_s = time.monotonic() - began
        service = next(r for r in procs.records(state) if r.name == "lapilli")
        procs.stop(service, state)
        await create_all(api, PODS, [gang_pod(g, i) for g in range(args.gangs) for i in range(args.gang_size)])
        await asyncio.sleep(5)  # kube-scheduler tries them, meets no extender, sets them aside
        total = args.gangs * args.gang_size
        url = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/readyz"
        t0 = time.monotonic()
        procs.spawn(service.name, service.argv, state, order=service.order)
        synced = first = None
        while True:
            now = time.monotonic() - t0
            if synced is None and await readyz(url):
                synced = now
            bound = await bound_gang_pods(api)
            if bound and first is None:
                first = now
            if bound >= total or now > args.timeout:
                break
            await asyncio.sleep(0.5)
        return {"nodes": args.nodes, "running_pods": args.running, "gang_pods": total, "gangs": args.gangs,
                "setup_s": round(setup_s, 1), "synced_s": synced and round(synced, 1),
                "first_bind_s": first and round(first, 1), "all_bound_s": round(time.monotonic() - t0, 1),
                "all_bound": bound >= total, "bound": bound}
    finally:
        await cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=8000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
