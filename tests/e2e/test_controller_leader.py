"""Two replicas of `lapilli serve` on the real control plane: only the holder of the controllers' Lease runs
the controllers, the other stands by (ready, creating nothing); when the holder dies the other takes the
Lease once it expires and reconciles what comes next, without creating anything a second time; a replica
stopped gracefully releases its Leases, so the next one leads at once."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from assembly.dev import DevCluster, procs
from assembly.dev.ports import free_ports
from assembly.dev.service import extender_client_ssl
from lapilli.kube import AlreadyExists, ApiError, KubeClient
from lapilli.kube.resources import LEASES, MUTATING_WEBHOOKS, PODGROUPS, VALIDATING_WEBHOOKS, VC_JOBS
from tests.e2e.test_controller_helpers import eventually, job_pods, remove_job, running_pods

NS = "e2e-leader"
LEASE_NS = "lapilli-system"
CONTROLLERS_LEASE = f"{LEASE_NS}/lapilli-controllers"
EXTENDER_LEASE = f"{LEASE_NS}/lapilli-extender"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Replica:
    name: str  # of its pid file and log under the cluster's state dir
    record: procs.ProcessRecord
    webhook_port: int
    extender_port: int
    extender_ssl: ssl.SSLContext  # kube-scheduler's client certificate: the extender port asks for it

    async def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        tls: ssl.SSLContext | bool = self.extender_ssl if port == self.extender_port else False
        url = f"https://127.0.0.1:{port or self.webhook_port}{path}"
        async with aiohttp.ClientSession() as http, http.get(url, ssl=tls) as resp:
            return resp.status, await resp.text()

    async def samples(self) -> Samples:
        status, text = await self.get("/metrics")
        assert status == 200, text
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    async def leadership(self, lease: str) -> tuple[str, bool]:
        """(identity, leads) as this replica's `lapilli_leader` gauge shows them for `lease`."""
        found = [(dict(labels)["identity"], value == 1.0) for (name, labels), value in (await self.samples()).items()
                 if name == "lapilli_leader" and dict(labels)["lease"] == lease]
        assert len(found) == 1, found
        return found[0]

    async def counted(self, metric: str) -> float:
        return sum(v for (name, _), v in (await self.samples()).items() if name == metric)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(Path(self.record.log).read_text(errors="replace").splitlines()[-lines:])


def vcjob(name: str) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "volcano", "minAvailable": 2,
                     "tasks": [{"name": "w", "replicas": 2, "template": {"spec": pod}}]}}


async def create_job(api: KubeClient, name: str) -> dict[str, Any]:
    """Create, retrying while kube-apiserver still calls the webhook at its previous address."""
    async def created() -> dict[str, Any] | None:
        try:
            return await api.create(VC_JOBS, vcjob(name), NS)
        except AlreadyExists:  # an earlier try went through after all
            return await api.get(VC_JOBS, name, NS)
        except ApiError:
            return None

    return await eventually(created, 30, f"Job {name} created")


async def podgroups_of(api: KubeClient, job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    return [pg for pg in (await api.list(PODGROUPS, NS)).items
            if any(ref.get("uid") == uid for ref in pg["metadata"].get("ownerReferences") or [])]


async def holder(api: KubeClient, name: str = "lapilli-controllers") -> str:
    return str((await api.get(LEASES, name, LEASE_NS)).get("spec", {}).get("holderIdentity") or "")


async def route_webhook(api: KubeClient, from_port: int, to_port: int) -> None:
    """Point kube-apiserver's webhook calls at another replica, as a Service does once the first is gone."""
    for resource in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
        for configuration in (await api.list(resource)).items:
            changed = False
            for hook in configuration.get("webhooks") or []:
                url = hook.get("clientConfig", {}).get("url") or ""
                if f"//127.0.0.1:{from_port}/" in url:
                    hook["clientConfig"]["url"] = url.replace(f":{from_port}/", f":{to_port}/")
                    changed = True
            if changed:
                await api.replace(resource, configuration)


def start_replica(cluster: DevCluster, first: Replica, name: str) -> Replica:
    """Another `lapilli serve` like the first, on ports of its own (the same certificate and Leases)."""
    webhook_port, extender_port = free_ports(2)
    argv = list(first.record.argv)
    argv[argv.index("--webhook-port") + 1] = str(webhook_port)
    argv[argv.index("--extender-port") + 1] = str(extender_port)
    argv.append("--session-thread")  # lighter: the extender is not what this test is about
    record = procs.spawn(name, argv, cluster.state_dir, tie_to_parent=True, order=98)
    return Replica(name, record, webhook_port, extender_port, first.extender_ssl)


async def ready(replica: Replica, port: int | None = None) -> bool:
    try:
        return (await replica.get("/readyz", port))[0] == 200
    except aiohttp.ClientError:
        return False


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    assert control_plane.info is not None and control_plane.info.extender
    await control_plane.ensure_namespace(NS)
    return control_plane


async def test_one_replica_runs_the_controllers_and_the_other_takes_over(cluster: DevCluster):
    api = cluster.client
    assert api is not None and cluster.info is not None
    record = next(r for r in procs.records(cluster.state_dir) if r.name == "lapilli")
    a = Replica("lapilli", record, cluster.info.ports["lapilli-webhook"], cluster.info.ports["lapilli-extender"],
                extender_client_ssl(cluster.state_dir))
    a_id, a_leads = await a.leadership(CONTROLLERS_LEASE)
    assert a_leads and await holder(api) == a_id, "the service that ran alone holds the controllers' Lease"

    b = start_replica(cluster, a, "lapilli-b")
    routed_to_b = False
    try:
        await eventually(lambda: ready(b), 60, f"replica b ready while standing by; log:\n{b.log_tail()}")
        b_id, b_leads = await b.leadership(CONTROLLERS_LEASE)
        assert b_id != a_id and not b_leads

        # The holder reconciles a Job; the standby does nothing at all with it.
        first = await create_job(api, "first")
        pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await running_pods(api, NS, "first", 2)}
        assert len(pods_before) == 2
        groups_before = [pg["metadata"]["uid"] for pg in await podgroups_of(api, first)]
        assert len(groups_before) == 1
        for metric in ("lapilli_controller_job_actions_total", "lapilli_controller_pods_created_total",
                       "lapilli_controller_podgroups_created_total"):
            assert await b.counted(metric) == 0, f"the standby acted: {metric}"
        assert await holder(api) == a_id

        # The holder dies without releasing anything; its webhook traffic goes to b, as a Service would send it.
        os.killpg(a.record.pid, signal.SIGKILL)
        await route_webhook(api, a.webhook_port, b.webhook_port)
        routed_to_b = True

        async def b_holds() -> bool:
            return await holder(api) == b_id and (await b.leadership(CONTROLLERS_LEASE))[1]

        await eventually(b_holds, 60, f"b took the controllers' Lease; log:\n{b.log_tail()}")
        second = await create_job(api, "second")

        async def reconciled() -> list[dict[str, Any]] | None:
            pods = await job_pods(api, NS, "second")
            return pods if len(pods) == 2 and len(await podgroups_of(api, second)) == 1 else None

        await eventually(reconciled, 60, f"b reconciled Job second; log:\n{b.log_tail()}")
        assert await b.counted("lapilli_controller_pods_created_total") >= 2
        assert await b.counted("lapilli_controller_podgroups_created_total") >= 1
        pods_after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await job_pods(api, NS, "first")}
        assert pods_after == pods_before, "the new leader re-created nothing of the Job it found"
        assert [pg["metadata"]["uid"] for pg in await podgroups_of(api, first)] == groups_before
    finally:
        await _restore(cluster, a, b, routed_to_b)
    try:
        # Restored: a leads again and runs a new Job. (The second one's pods wait out kube-scheduler's retry
        # of pods that met a dead extender, up to a minute.)
        await create_job(api, "third")
        await running_pods(api, NS, "third", 2)
    finally:
        await asyncio.gather(*(remove_job(api, NS, name) for name in ("first", "second", "third")))


async def _restore(cluster: DevCluster, a: Replica, b: Replica, routed_to_b: bool) -> None:
    """The session's service back as it was: `a` restarted, leading both Leases and receiving the webhook;
    `b` stopped gracefully, which releases its Leases so `a` takes them at its next try."""
    api = cluster.client
    assert api is not None
    if not procs.is_alive(a.record):
        a.record = procs.spawn(a.name, a.record.argv, cluster.state_dir, tie_to_parent=True, order=99)
        await eventually(lambda: ready(a), 60, f"a restarted and ready while b leads; log:\n{a.log_tail()}")
    if routed_to_b:
        await route_webhook(api, b.webhook_port, a.webhook_port)
    b_leads = procs.is_alive(b.record) and (await b.leadership(CONTROLLERS_LEASE))[1]
    await asyncio.to_thread(procs.stop, b.record, cluster.state_dir)
    a_id, _ = await a.leadership(CONTROLLERS_LEASE)

    async def a_leads_both() -> bool:
        return (await holder(api) == a_id and await holder(api, "lapilli-extender") == a_id
                and await ready(a, a.extender_port))

    await eventually(a_leads_both, 60, f"a leads again; log:\n{a.log_tail()}")
    if b_leads:
        # Released, not expired: a took each Lease with no holder in it (after an expiry its log names the holder
        # it took the Lease from).
        log = Path(a.record.log).read_text(errors="replace").splitlines()
        for lease in (CONTROLLERS_LEASE, f"{LEASE_NS}/lapilli-extender"):
            taken = [line for line in log if f"Lease {lease} acquired by {a_id}" in line]
            assert taken and " from " not in taken[-1], f"b's Lease {lease} expired instead: {taken[-1:]}"
