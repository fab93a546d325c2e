"""Idle-GPU reclaim on the real control plane with a real Prometheus (issue 21): the simulated kubelet exports each
pod's GPU utilisation as the DCGM exporter does (`sim.lapilli.io/gpu-util`), Debian's Prometheus scrapes it every
second, and the service reads it with `--idle-gpu-*` flags scaled down to seconds (window 4 s, grace 4 s, a reading a
second).

With `--idle-gpu-mode on` (2 nodes x 4 GPUs): lab-idle (policy reclaim, and not reclaimable, so plain reclaim could
never take anything from it) runs an idle 4-GPU notebook, a busy 2-GPU job and an idle 2-GPU job that opts out. The
notebook alone is warned; then lab-wait's 4-GPU job, which has no room and is not even admitted, waits; once the
notebook is reclaimable it is admitted, the notebook's pod is evicted through the conf's reclaim action (Lapilli's
ships gangreclaim) and the waiting job runs; the
busy and opted-out jobs keep their pods. With `--idle-gpu-mode dry-run` the notebook is marked ReclaimableDryRun and
keeps its GPUs while the other job waits.

Each mode has its own control plane (the mode is a flag of `lapilli serve`), one after the other."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from assembly.dev.ports import free_ports
from lapilli.kube import KubeClient
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import EVENTS, PODGROUPS, PODS, QUEUES
from tests.e2e.extender_helpers import GROUP, eventually
from tests.e2e.metrics import service_metric, sessions_run
from tests.e2e.prometheus import running_prometheus

NS = "idle"
GPU = "nvidia.com/gpu"
QUERY = "max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"  # instant readings: the test's window is seconds long


@pytest_asyncio.fixture(scope="class", loop_scope="session")
async def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  ) -> AsyncIterator[tuple[DevCluster, KubeClient]]:
    """A control plane whose service runs idle-GPU reclaim in the class's MODE, with Prometheus scraping its GPUs."""
    mode: str = request.cls.MODE
    state = tmp_path_factory.mktemp(f"idle-gpu-{mode}")
    prometheus_port = free_ports(1)[0]
    spec = ClusterSpec(
        state_dir=state, nodes=2, shape=NodeShape(cpu="16", memory="64Gi", gpus=4), kubelet="inprocess",
        tie_to_parent=True, heartbeat_s=10.0, extender=True,
        serve_args=("--idle-gpu-mode", mode, "--prometheus-url", f"http://127.0.0.1:{prometheus_port}",
                    "--idle-gpu-query", QUERY, "--idle-gpu-window", "4", "--idle-gpu-grace", "4",
                    "--idle-gpu-interval", "1"),
    )
    dev = DevCluster(spec, find_binaries())
    await dev.up()
    try:
        assert dev.info is not None and dev.client is not None
        targets = [f"127.0.0.1:{dev.info.ports['gpu-metrics']}"]
        async with running_prometheus(state / "prometheus", targets, prometheus_port):
            await dev.ensure_namespace(NS)
            await _queue(dev.client, "lab-idle", reclaimable=False, policy="reclaim")
            await _queue(dev.client, "lab-wait")
            yield dev, dev.client
    finally:
        await dev.down()


async def _queue(client: KubeClient, name: str, *, reclaimable: bool = True, policy: str = "") -> None:
    annotations = {"lapilli.io/idle-gpu-policy": policy} if policy else {}
    await client.create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                 "metadata": {"name": name, "annotations": annotations},
                                 "spec": {"weight": 1, "reclaimable": reclaimable}})

    async def is_open() -> bool:
        return ((await client.get(QUEUES, name)).get("status") or {}).get("state") == "Open"

    await eventually(is_open, 30)


async def job(client: KubeClient, name: str, queue: str, gpus: int, *, util: str | None = None,
              annotations: dict[str, str] | None = None, min_resources: bool = False) -> str:
    """A PodGroup (with `annotations`) and its one pod asking for `gpus` GPUs, idle or busy as `util` says; returns the
    pod's name."""
    spec: dict[str, Any] = {"minMember": 1, "queue": queue}
    if min_resources:
        spec["minResources"] = {"cpu": "1", GPU: str(gpus)}
    await client.create(PODGROUPS, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                    "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
                                    "spec": spec}, NS)
    pod = f"{name}-0"
    notes = {GROUP: name, **({"sim.lapilli.io/gpu-util": util} if util is not None else {})}
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS,
                                                                             "annotations": notes},
                               "spec": {"schedulerName": "volcano", "containers": [{
                                   "name": "main", "image": "busybox",
                                   "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                               }]}}, NS)
    return pod


async def running_uid(client: KubeClient, pod: str) -> str | None:
    try:
        obj = await client.get(PODS, pod, NS)
    except NotFound:
        return None
    return str(obj["metadata"]["uid"]) if (obj.get("status") or {}).get("phase") == "Running" else None


async def idle_condition(client: KubeClient, podgroup: str) -> dict[str, Any] | None:
    conditions = ((await client.get(PODGROUPS, podgroup, NS)).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "lapilli.io/IdleGPU"), None)


async def reason_is(client: KubeClient, podgroup: str, reason: str) -> dict[str, Any] | None:
    condition = await idle_condition(client, podgroup)
    return condition if condition is not None and condition.get("reason") == reason else None


async def events(client: KubeClient, podgroup: str) -> list[str]:
    items = (await client.list(EVENTS, NS, field_selector=f"involvedObject.name={podgroup}")).items
    return [str(e.get("reason")) for e in sorted(items, key=lambda e: str(e.get("firstTimestamp")))]


async def _has_event(client: KubeClient, podgroup: str, reason: str) -> bool:
    return reason in await events(client, podgroup)


class TestReclaim:
    MODE = "on"

    async def test_an_idle_job_is_warned_then_evicted_for_a_waiting_one(
            self, cluster: tuple[DevCluster, KubeClient]) -> None:
        dev, client = cluster
        notebook = await job(client, "notebook", "lab-idle", 4, util="0")
        await eventually(lambda: running_uid(client, notebook), 90)
        busy = await job(client, "busy", "lab-idle", 2, util="80")
        keep = await job(client, "keep", "lab-idle", 2, util="0", annotations={"lapilli.io/idle-gpu-reclaim": "false"})
        busy_uid = await eventually(lambda: running_uid(client, busy), 90)
        keep_uid = await eventually(lambda: running_uid(client, keep), 90)

        warned = await eventually(lambda: reason_is(client, "notebook", "Idle"), 60)
        assert warned["status"] == "True" and "GPUs below 5%" in warned["message"], warned
        # The condition and the Event are two writes: wait for the second rather than read it in the same instant.
        await eventually(lambda: _has_event(client, "notebook", "IdleGPU"), 30)

        # lab-wait's job needs the notebook's 4 GPUs: the cluster is full, so it is not even admitted until the
        # notebook's room counts as reclaimable.
        train = await job(client, "train", "lab-wait", 4, min_resources=True)
        await eventually(lambda: reason_is(client, "notebook", "Reclaimable"), 60)
        await eventually(lambda: running_uid(client, train), 90)
        assert await running_uid(client, notebook) is None, "the notebook's pod was evicted"

        reasons = await eventually(lambda: _with(events(client, "notebook"), "IdleGPUReclaimed"), 30)
        assert reasons.index("IdleGPU") < reasons.index("IdleGPUReclaimable") < reasons.index("IdleGPUReclaimed")
        # Through the conf's reclaim action (Lapilli's conf: gangreclaim; per-pod reclaim where a conf lists it).
        evictions = {action: await service_metric(dev, "lapilli_idle_gpu_evictions_total",
                                                  {"action": action, "queue": "lab-idle"})
                     for action in ("reclaim", "gangreclaim")}
        assert sorted(n or 0.0 for n in evictions.values()) == [0.0, 1.0], evictions
        # The busy job and the one that opted out keep their pods, and were never warned.
        assert await running_uid(client, busy) == busy_uid and await running_uid(client, keep) == keep_uid
        assert await idle_condition(client, "busy") is None and await idle_condition(client, "keep") is None


class TestDryRun:
    MODE = "dry-run"

    async def test_dry_run_only_reports(self, cluster: tuple[DevCluster, KubeClient]) -> None:
        dev, client = cluster
        notebook = await job(client, "notebook", "lab-idle", 4, util="0")
        filler = await job(client, "filler", "lab-idle", 4, util="90")
        notebook_uid = await eventually(lambda: running_uid(client, notebook), 90)
        await eventually(lambda: running_uid(client, filler), 90)
        train = await job(client, "train", "lab-wait", 4)
        marked = await eventually(lambda: reason_is(client, "notebook", "ReclaimableDryRun"), 60)
        assert "dry run: nothing is evicted" in marked["message"], marked
        assert "IdleGPUReclaimableDryRun" in await eventually(
            lambda: _with(events(client, "notebook"), "IdleGPUReclaimableDryRun"), 30)
        # Readings and sessions go on, each seen by its own signal (the notebook's idle time grows, sessions run), and
        # nothing is taken: no eviction was asked for, the notebook keeps its pod and the other job waits.
        idle = {"podgroup": f"{NS}/notebook"}
        idle_s = await service_metric(dev, "lapilli_idle_gpu_idle_seconds", idle) or 0.0
        sessions = await sessions_run(dev)

        async def went_on() -> bool:
            return ((await service_metric(dev, "lapilli_idle_gpu_idle_seconds", idle) or 0.0) >= idle_s + 8
                    and await sessions_run(dev) >= sessions + 8)

        await eventually(went_on, 90)
        assert (await service_metric(dev, "lapilli_evictions_total") or 0.0) == 0.0
        assert await reason_is(client, "notebook", "ReclaimableDryRun") is not None
        assert await running_uid(client, notebook) == notebook_uid and await running_uid(client, train) is None
        assert await service_metric(dev, "lapilli_idle_gpu_jobs", {"state": "ReclaimableDryRun"}) == 1.0


async def _with(reasons: Any, reason: str) -> list[str] | None:
    got: list[str] = await reasons
    return got if reason in got else None
