"""Restart recovery at scale: how long a restarted `lapilli serve` takes to be synced and to bind again.

    .venv/bin/python bench/restart.py [--nodes 1000] [--running 8000] [--gangs 500] [--gang-size 4]
        [--profile DIR] [--out FILE]

Starts a dev cluster of NODES simulated nodes (8 GPUs each, the kubelet as its own process; the extender port on
plain HTTP as shipped), creates RUNNING pods
already bound round-robin (0.1 CPU, no GPU, running for an hour) and waits until the kubelet has them all Running,
creates GANGS PodGroups, stops the service (and its supervisor: SIGTERM, as an upgrade's rollout does), creates
GANGS x GANG_SIZE one-GPU gang pods of `volcano` (kube-scheduler meets no extender and sets them aside), then starts
the service again and records, on this process's monotonic clock from the spawn: the service's /readyz answering
200 (its caches synced), the first gang pod bound, every gang pod bound, and the bound count over time (from a
watch opened before the spawn, so counting costs the API server nothing per sample). It also records the CPU
seconds each process of the cluster spent from the spawn to the last bind (load-independent, unlike the times),
and the peak RSS of the service and its session process. `--profile DIR`: py-spy samples the service and its
session process from the spawn to the last bind (DIR/restart.txt, collapsed stacks of CPU samples only).

Prints one JSON object; `--out FILE` also writes it (bench/scale_plots.py draws the timelines). Volcano's users
report 8 minutes to recover at 5,000 nodes (volcano-sh/volcano#5819).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

# A script in bench/ must never shadow a package it measures: drop the script directory Python put first, and
# reach its siblings as the package `bench` from the repository root.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import aiohttp  # noqa: E402

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries, procs  # noqa: E402
from assembly.dev.nodes import node_name  # noqa: E402
from bench.procstats import cpu_by_role, peak_rss_by_role  # noqa: E402
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


async def wait_ready(url: str, timeout_s: float) -> float | None:
    """Seconds until `url` answers 200, polled every 0.25 s over one kept-alive connection (a TLS handshake per poll
    would cost the service more than the answer); None on timeout."""
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    began = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() - began < timeout_s:
            try:
                async with http.get(url, ssl=insecure) as resp:
                    if resp.status == 200:
                        return time.monotonic() - began
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass
            await asyncio.sleep(0.25)
    return None


class Counter:
    """Pods of the bench namespace matching `wanted`, counted from a watch: when each was first seen so."""

    def __init__(self, api: KubeClient, wanted: Any) -> None:
        self.api, self.wanted = api, wanted
        self.seen: dict[str, float] = {}  # pod name -> monotonic time first seen matching
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self.api.list(PODS, NS)
        now = time.monotonic()
        for pod in listed.items:
            if self.wanted(pod):
                self.seen.setdefault(pod["metadata"]["name"], now)
        self._task = asyncio.create_task(self._follow(listed.resource_version))

    async def _follow(self, version: str) -> None:
        while True:
            async for event in self.api.watch(PODS, NS, resource_version=version, timeout_seconds=3600,
                                              allow_bookmarks=True):
                version = event.resource_version or version
                if event.type != "BOOKMARK" and self.wanted(event.object):
                    self.seen.setdefault(event.object["metadata"]["name"], time.monotonic())
                    self.changed.set()

    async def until(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.seen) < count:
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                async with asyncio.timeout(min(left, 5.0)):
                    await self.changed.wait()
            except TimeoutError:
                pass
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _running(pod: dict[str, Any]) -> bool:
    return pod["metadata"]["name"].startswith("run-") and (pod.get("status") or {}).get("phase") == "Running"


def _bound_gang_pod(pod: dict[str, Any]) -> bool:
    return pod["metadata"]["name"].startswith("gang-") and bool((pod.get("spec") or {}).get("nodeName"))


def timeline(times: list[float], step_s: float = 1.0) -> list[tuple[float, int]]:
    """(seconds, pods bound by then), one point per step and one at the last bind."""
    times = sorted(times)
    if not times:
        return []
    points: list[tuple[float, int]] = []
    t, i = 0.0, 0
    while t < times[-1]:
        while i < len(times) and times[i] <= t:
            i += 1
        points.append((round(t, 2), i))
        t += step_s
    points.append((round(times[-1], 2), len(times)))
    return points


# Lines of the service's log that mark where a restart's time went, by what they start with after the logger's name.
MILESTONES = {"serving:": "all components started", "extender listening": "extender listening",
              "session process synced": "session process synced", "first session of this term": "first session",
              "controllers running": "controllers running"}


def milestones(log: Path, since: float) -> dict[str, float]:
    """Seconds from `since` (wall clock) to the first line of each milestone the service logged after it."""
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if stamp < since:
            continue
        message = line[24:].split(": ", 1)[-1]
        for start, name in MILESTONES.items():
            if message.startswith(start) and name not in found:
                found[name] = round(stamp - since, 1)
    return found


def start_profiler(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` and its children (the session process), CPU samples only, collapsed stacks."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy not found (pip install py-spy): not profiling", file=sys.stderr)
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--subprocesses", "--rate", "100", "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _service_pid(cluster: DevCluster, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while (pid := cluster.service_pid()) is None:
        if time.monotonic() > deadline:
            raise RuntimeError("the restarted service never started")
        await asyncio.sleep(0.02)
    return pid


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="lapilli-restart-"))
    # The extender port as shipped: plain HTTP on loopback, kube-scheduler beside the service in one pod.
    cluster = DevCluster(ClusterSpec(state_dir=state, nodes=args.nodes, shape=NodeShape(gpus=8), extender=True,
                                     kubelet="process", extender_over_tls=False), find_binaries())
    began = time.monotonic()
    await cluster.up()
    try:
        api = cluster.client
        assert api is not None and cluster.info is not None
        await cluster.ensure_namespace(NS)
        running = Counter(api, _running)
        await running.start()
        await create_all(api, PODS, [running_pod(i, args.nodes) for i in range(args.running)], args.concurrency)
        await create_all(api, PODGROUPS, [podgroup(g, args.gang_size) for g in range(args.gangs)], args.concurrency)
        if not await running.until(args.running, args.timeout):
            raise RuntimeError(f"only {len(running.seen)} of {args.running} running pods started")
        await running.stop()
        setup_s = time.monotonic() - began
        service = next(r for r in procs.records(state) if r.name == "lapilli")
        procs.stop(service, state)
        total = args.gangs * args.gang_size
        await create_all(api, PODS, [gang_pod(g, i) for g in range(args.gangs) for i in range(args.gang_size)],
                         args.concurrency)
        await asyncio.sleep(5)  # kube-scheduler tries them, meets no extender, sets them aside
        bound = Counter(api, _bound_gang_pod)
        await bound.start()
        url = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/readyz"
        cpu_before = cpu_by_role()
        t0, wall0 = time.monotonic(), time.time()
        procs.spawn(service.name, service.argv, state, order=service.order)
        spy = start_profiler(await _service_pid(cluster), Path(args.profile) / "restart.txt") if args.profile else None
        synced = None if await wait_ready(url, args.timeout) is None else time.monotonic() - t0
        done = await bound.until(total, args.timeout - (time.monotonic() - t0))
        cpu = {role: round(used - cpu_before.get(role, 0.0), 2) for role, used in cpu_by_role().items()}
        rss = {role: round(mib) for role, mib in peak_rss_by_role().items()
               if role in ("lapilli service", "session process")}
        if spy is not None:
            spy.send_signal(2)  # py-spy writes its output on SIGINT
            spy.wait(60)
        await bound.stop()
        times = [t - t0 for t in bound.seen.values()]
        return {"nodes": args.nodes, "running_pods": args.running, "gang_pods": total, "gangs": args.gangs,
                "setup_s": round(setup_s, 1), "synced_s": synced and round(synced, 1),
                "first_bind_s": round(min(times), 1) if times else None,
                "all_bound_s": round(max(times), 1) if done and times else None,
                "bound": len(times), "all_bound": done,
                "pods_per_s_after_first": round((len(times) - 1) / (max(times) - min(times)), 1)
                if len(times) > 1 and max(times) > min(times) else None,
                "service_log": milestones(Path(service.log), wall0),
                "cpu_s_to_last_bind": cpu, "peak_rss_mib": rss, "timeline": timeline(times)}
    finally:
        await cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=8000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64, help="creates in flight while setting up")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--profile", help="directory for py-spy's samples of the restarted service")
    parser.add_argument("--out", help="also write the JSON here")
    result = asyncio.run(run(parser.parse_args()))
    text = json.dumps(result)
    # Printed before the file is written: an hour's run is never lost to a missing directory.
    print(json.dumps({k: v for k, v in result.items() if k != "timeline"}, indent=2), flush=True)
    if (out := parser.parse_args().out) is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main()
