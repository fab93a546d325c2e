"""Helpers of the fault tests (no tests here): gang Jobs, a sampler that catches gangs partly bound (and the rule
that says when a sighting is one), and the control of the cluster's processes (kill and restart kube-apiserver,
a second kube-apiserver on the same etcd, SIGKILL the service, stop and start it)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import signal
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from assembly.dev import DevCluster, procs
from assembly.dev.controlplane import wait_ready
from assembly.dev.ports import free_ports
from lapilli.kube import AlreadyExists, ApiError, KubeClient
from lapilli.kube.resources import NAMESPACES, PODGROUPS, PODS, VC_JOBS
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


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the namespace: the gangs seen partly bound (some pods on a node or finished there, fewer than
    the PodGroup's minMember), and whether a gang release of the service overlapped the look (None: the service
    could not say — unreachable, or restarted while it was asked)."""

    at: float
    partial: frozenset[str]
    releasing: bool | None


def partly_bound(samples: Sequence[Sample]) -> dict[str, str]:
    """The gangs the samples show partly bound, each with why; the one rule of the fault tests.

    A gang's release (extender/service/permit.py) sends its Bindings as separate POSTs at once, and a gang evicted
    whole (gangpreempt, gangreclaim) its Eviction calls, so a look at the pods can land between them and see the
    gang partly bound for those milliseconds, with nothing wrong. Such a sighting is excused only when it could be
    that:
    - the service shows a release or an eviction overlapping the look (`lapilli_gang_releases_in_flight` or
      `lapilli_evictions_in_flight` > 0 just before it, or `lapilli_gang_releases_total` or
      `lapilli_evictions_total` grown just after it). The service does not say whose, so any one excuses the
      sighting; when it cannot say at all, nothing is excused;
    - and the next look does not see the gang partly bound again: a release is answered in milliseconds, far
      within one sampling interval, so two sightings in a row are a gang left partly bound.
    """
    found: dict[str, str] = {}
    for i, sample in enumerate(samples):
        for gang in sorted(sample.partial - found.keys()):
            if i + 1 < len(samples) and gang in samples[i + 1].partial:
                found[gang] = f"partly bound at samples {i} and {i + 1} in a row"
            elif sample.releasing is not True:
                why = "no gang release under way" if sample.releasing is False else "the service could not say"
                found[gang] = f"partly bound at sample {i}, {why}"
    return found


async def release_counts(cluster: DevCluster) -> tuple[float, float] | None:
    """The service's gang releases so far and under way, from its /metrics (None when it does not answer)."""
    assert cluster.info is not None
    return await release_counts_at(f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/metrics")


async def release_counts_at(url: str) -> tuple[float, float] | None:
    """A Lapilli /metrics page's gang releases and evictions so far and under way (None when it does not answer or
    has none): either may leave a gang partly bound for a moment."""
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http, \
                http.get(url, ssl=_insecure() if url.startswith("https:") else None) as resp:
            text = await resp.text()
        pattern = r"^(lapilli_gang_releases\w*|lapilli_evictions_total|lapilli_evictions_in_flight) (\S+)$"
        values = {m[0]: float(m[1]) for m in re.findall(pattern, text, re.M)}
        if "lapilli_gang_releases_total" in values and "lapilli_gang_releases_in_flight" in values:
            return (values["lapilli_gang_releases_total"] + values.get("lapilli_evictions_total", 0.0),
                    values["lapilli_gang_releases_in_flight"] + values.get("lapilli_evictions_in_flight", 0.0))
    return None


def overlapped(before: Sequence[tuple[float, float] | None], after: Sequence[tuple[float, float] | None]) -> bool | None:
    """Whether a gang release overlapped a look, from each service's release counts just before and just after it
    (None: some service could not say, so nothing is excused)."""
    found = False
    for b, a in zip(before, after, strict=True):
        if b is None or a is None:
            return None
        found = found or b[1] > 0 or a[0] > b[0]
    return found


@dataclass
class GangSampler:
    """Looks at the namespace's pods every `interval_s` (through `api`), asking `cluster`'s service about its gang
    releases just before and just after each look; `partly_bound()` applies the rule to what it saw. `partial`
    holds each gang's first and last partial sighting; `longest_s` is the longest time one gang stayed so, from
    its first to its last sighting plus one interval."""

    api: KubeClient
    cluster: DevCluster
    interval_s: float = 1.0
    namespace: str = NS
    history: list[Sample] = field(default_factory=list)
    partial: dict[str, tuple[float, float]] = field(default_factory=dict)  # gang -> (first, last) sighting
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GangSampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def samples(self) -> int:
        return len(self.history)

    def partly_bound(self) -> dict[str, str]:
        return partly_bound(self.history)

    def unasked(self) -> int:
        """Samples the service could not tell about its releases (down, restarted): none excuses a sighting."""
        return sum(1 for s in self.history if s.releasing is None)

    @property
    def longest_s(self) -> float:
        return max((last - first + self.interval_s for first, last in self.partial.values()), default=0.0)

    async def sample(self) -> None:
        pid, before = self.cluster.service_pid(), await release_counts(self.cluster)
        pods = (await self.api.list(PODS, self.namespace)).items
        groups = {pg["metadata"]["name"]: int(pg["spec"].get("minMember") or 1)
                  for pg in (await self.api.list(PODGROUPS, self.namespace)).items}
        after = await release_counts(self.cluster)
        releasing = None
        if pid is not None and self.cluster.service_pid() == pid:
            releasing = overlapped([before], [after])
        bound: dict[str, int] = {}
        for pod in pods:
            group = (pod["metadata"].get("annotations") or {}).get(GROUP)
            if group and pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                bound[group] = bound.get(group, 0) + 1
        now = time.monotonic()
        partial = frozenset(g for g, count in bound.items() if g in groups and count < groups[g])
        self.history.append(Sample(now, partial, releasing))
        for group in partial:
            first, _ = self.partial.get(group, (now, now))
            self.partial[group] = (first, now)

    async def _run(self) -> None:
        while True:
            began = time.monotonic()
            with contextlib.suppress(ApiError, aiohttp.ClientError, OSError, TimeoutError):
                await self.sample()  # an API server outage skips samples, it does not end the sampling
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - began)))


# -- the cluster's processes -------------------------------------------------------------------------------


def _insecure() -> ssl.SSLContext:
    """The dev cluster's webhook certificate is its own: the tests reach its port without verifying it."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


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
                    http.get(url, ssl=_insecure()) as resp:
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
