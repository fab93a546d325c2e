"""Helpers of the fault tests (no tests here): gang Jobs, a sampler that catches gangs partly bound (and the rule
that says when a sighting is one), and the control of the cluster's processes (kill and restart kube-apiserver,
a second kube-apiserver on the same etcd, SIGKILL the service, stop and start it)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp

from assembly.dev import DevCluster, procs
from assembly.dev.controlplane import wait_ready
from assembly.dev.ports import free_ports
from lapilli.kube import AlreadyExists, ApiError, KubeClient
from lapilli.kube.resources import NAMESPACES, PODS, VC_JOBS
from tests.e2e.gangs import insecure
from tests.e2e.test_controller_helpers import eventually, get_job, phase

NS = "faults"
GROUP = "scheduling.k8s.io/group-name"


def gang_job(name: str, replicas: int = 4, gpus: int = 1, duration: str = "2s") -> dict[str, Any]:
    """A Volcano Job of `replicas` pods of `gpus` GPUs each, all needed at once; each pod runs `duration`."""
    container = {"name": "main", "image": "busybox", "resources": {
        "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)}}}
    template = {"metadata": {"annotations": {"sim.lapilli.io/duration": duration}},
                "spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "volcano", "minAvailable": replicas,
                     "tasks": [{"name": "w", "replicas": replicas, "template": template}]}}


async def submit(api: KubeClient, obj: dict[str, Any], timeout_s: float = 60, *, dry_run: bool = False,
                 ) -> dict[str, Any]:
    """Create (or, with `dry_run`, only admit), retrying while kube-apiserver or the webhook are not back yet."""
    errors: list[str] = []

    async def created() -> dict[str, Any] | None:
        try:
            return await api.create(VC_JOBS, obj, NS, dry_run=dry_run)
        except AlreadyExists:
            return await api.get(VC_JOBS, obj["metadata"]["name"], NS)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            return None

    try:
        return await eventually(created, timeout_s, f"Job {obj['metadata']['name']} created")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last error: {errors[-1] if errors else 'none'}") from None


async def wait_completed(api: KubeClient, names: Iterable[str], timeout_s: float) -> None:
    pending = set(names)

    async def done() -> bool:
        for name in list(pending):
            with contextlib.suppress(ApiError, aiohttp.ClientError, OSError):
                job = await get_job(api, NS, name)
                assert phase(job) not in ("Failed", "Aborted", "Terminated"), f"Job {name} ended {phase(job)}"
                if phase(job) == "Completed":
                    pending.discard(name)
        return not pending

    await eventually(done, timeout_s, f"Jobs completed (still waiting: {sorted(pending)})")


async def pods_of(api: KubeClient, name: str) -> list[dict[str, Any]]:
    return (await api.list(PODS, NS, label_selector=f"volcano.sh/job-name={name}")).items


async def assert_nothing_lost(api: KubeClient, names: Iterable[str], replicas: int = 4) -> None:
    """Each Job made exactly its replicas (one pod per index, none re-created) and every one succeeded."""
    for name in names:
        pods = await pods_of(api, name)
        assert sorted(p["metadata"]["name"] for p in pods) == [f"{name}-w-{i}" for i in range(replicas)], name
        assert all((p.get("status") or {}).get("phase") == "Succeeded" for p in pods), name


# -- the cluster's processes -------------------------------------------------------------------------------


def record(cluster: DevCluster, name: str) -> procs.ProcessRecord:
    return next(r for r in procs.records(cluster.state_dir) if r.name == name)


async def api_answers(api: KubeClient, timeout_s: float = 90) -> None:
    async def answers() -> bool:
        with contextlib.suppress(ApiError, aiohttp.ClientError, OSError, TimeoutError):
            await api.get(NAMESPACES, "default")
            return True
        return False

    await eventually(answers, timeout_s, "kube-apiserver answers")


async def kill_apiserver(cluster: DevCluster) -> procs.ProcessRecord:
    """SIGKILL kube-apiserver (no graceful shutdown, every watch cut at once); returns its record."""
    rec = record(cluster, "kube-apiserver")
    os.kill(rec.pid, signal.SIGKILL)
    while procs.is_alive(rec):
        await asyncio.sleep(0.05)
    return rec


async def start_apiserver(cluster: DevCluster, rec: procs.ProcessRecord) -> None:
    """The same kube-apiserver again (same flags, certificates and etcd), once it is ready."""
    assert cluster.client is not None
    again = procs.spawn(rec.name, rec.argv, cluster.state_dir, tie_to_parent=True, order=rec.order)
    port = next(a for a in rec.argv if a.startswith("--secure-port=")).split("=", 1)[1]
    token = cluster.client.config.bearer_token()
    await wait_ready(again, f"https://127.0.0.1:{port}/readyz", timeout_s=90, token=token)


@contextlib.asynccontextmanager
async def second_apiserver(cluster: DevCluster) -> AsyncIterator[KubeClient]:
    """A second kube-apiserver on the same etcd, as an HA control plane has: it keeps serving users (and calling
    the webhook) while the first, the one the service and kube-scheduler talk to, is down. Yields a client of it
    once it serves Jobs through both webhooks (a dry-run create); stopped on exit."""
    api = cluster.client
    assert api is not None
    first = record(cluster, "kube-apiserver")
    port = free_ports(1)[0]
    argv = [f"--secure-port={port}" if a.startswith("--secure-port=") else a for a in first.argv]
    second = procs.spawn("kube-apiserver-2", argv, cluster.state_dir, tie_to_parent=True, order=first.order)
    other = KubeClient(dataclasses.replace(api.config, server=f"https://127.0.0.1:{port}"))
    try:
        await wait_ready(second, f"https://127.0.0.1:{port}/readyz", timeout_s=90, token=api.config.bearer_token())
        await submit(other, gang_job("probe", duration="1s"), dry_run=True)
        yield other
    finally:
        await other.close()
        procs.stop(second, cluster.state_dir)


def service_pid(cluster: DevCluster) -> int:
    pid = cluster.service_pid()
    assert pid is not None, "lapilli serve is not running"
    return pid


async def service_ready(cluster: DevCluster, timeout_s: float = 90, not_pid: int | None = None) -> int:
    """Wait until a `lapilli serve` (another one than `not_pid`) answers 200 on /readyz; returns its pid."""
    assert cluster.info is not None
    url = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/readyz"

    async def ready() -> int | None:
        pid = cluster.service_pid()
        if pid is None or pid == not_pid:
            return None
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http, \
                    http.get(url, ssl=insecure()) as resp:
                return pid if resp.status == 200 else None
        return None

    return int(await eventually(ready, timeout_s, "lapilli serve ready"))


def sigkill_service(cluster: DevCluster) -> int:
    """SIGKILL `lapilli serve` (not its supervisor, which starts it again); returns the pid killed."""
    pid = service_pid(cluster)
    os.kill(pid, signal.SIGKILL)
    return pid


def stop_service(cluster: DevCluster) -> procs.ProcessRecord:
    """Stop the service and its supervisor: the service is down until `start_service`."""
    rec = record(cluster, "lapilli")
    procs.stop(rec, cluster.state_dir)
    return rec


async def start_service(cluster: DevCluster, rec: procs.ProcessRecord) -> None:
    procs.spawn(rec.name, rec.argv, cluster.state_dir, tie_to_parent=True, order=rec.order)
    await service_ready(cluster)
