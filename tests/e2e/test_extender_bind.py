"""Issue 12's attacks on the bind verb, on the real control plane: an HTTP POST to the extender's bind (with
kube-scheduler's own client certificate, so only the verb's authorisation stands in the way) for a pod of
`default-scheduler`, a pod in `kube-system`, a pod onto a tainted node, onto a node whose GPUs are full, onto a node
that does not exist, and with the wrong UID. Each is answered with a reason, counted by reason on /metrics, and the
pod is left unbound. What kube-scheduler would choose is still bound."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from assembly.dev import DevCluster
from assembly.dev.service import extender_client_ssl
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import NODES, PODS
from tests.e2e.extender_helpers import Pool, eventually

GPU1 = {"cpu": "1", "nvidia.com/gpu": "1"}
SYSTEM_POD = "coredns-attack"
NOWHERE = {"lapilli.io/pool": "no-such-pool"}  # keeps a pod pending: no node has this label


@pytest.fixture
async def pool(control_plane: DevCluster) -> AsyncIterator[Pool]:
    await control_plane.ensure_namespace("e2e-bind-attacks")
    await control_plane.ensure_namespace("kube-system")  # its `default` ServiceAccount, for the kube-system pod
    p = Pool(control_plane, "bindatk", "e2e-bind-attacks")
    try:
        yield p
    finally:
        await p.cleanup()
        client = control_plane.client
        assert client is not None
        with contextlib.suppress(NotFound):
            await client.delete(PODS, SYSTEM_POD, "kube-system", grace_period_seconds=0)


class Verbs:
    def __init__(self, cluster: DevCluster) -> None:
        assert cluster.info is not None
        self.cluster = cluster
        self.url = f"https://127.0.0.1:{cluster.info.ports['lapilli-extender']}/extender/gang/bind"
        self.metrics = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/metrics"
        self.tls = extender_client_ssl(cluster.state_dir)

    async def bind(self, pod: dict[str, Any], node: str, uid: str | None = None) -> str:
        meta = pod["metadata"]
        body = {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                "PodUID": meta["uid"] if uid is None else uid, "Node": node}
        async with aiohttp.ClientSession() as http, http.post(self.url, json=body, ssl=self.tls) as resp:
            assert resp.status == 200, await resp.text()
            return str((await resp.json())["Error"])

    async def refusals(self) -> dict[str, float]:
        async with aiohttp.ClientSession() as http, http.get(self.metrics, ssl=False) as resp:
            text = await resp.text()
        return {s.labels["reason"]: s.value for family in text_string_to_metric_families(text)
                for s in family.samples if s.name == "lapilli_extender_bind_refusals_total"}


async def _pod(cluster: DevCluster, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    client = cluster.client
    assert client is not None
    return await client.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": name, "namespace": namespace}, "spec": spec}, namespace)


async def _unbound(cluster: DevCluster, pod: dict[str, Any]) -> bool:
    client = cluster.client
    assert client is not None
    current = await client.get(PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
    return not (current.get("spec") or {}).get("nodeName")


async def test_each_attack_is_refused_and_the_pod_stays_unbound(pool: Pool, control_plane: DevCluster):
    verbs = Verbs(control_plane)
    full, tainted = await pool.add_nodes(2, gpus=1)
    client = control_plane.client
    assert client is not None
    # `full`: its one GPU taken by a pod placed there by hand; `tainted`: a taint pool pods do not tolerate.
    await _pod(control_plane, pool.namespace, "gpu-holder", {**pool.pod_spec(GPU1, "nobody"), "nodeName": full})
    pool.pods.append("gpu-holder")
    node = await client.get(NODES, tainted)
    taints = [*(node["spec"].get("taints") or []), {"key": "attack", "value": "no", "effect": "NoSchedule"}]
    await client.patch(NODES, tainted, {"spec": {"taints": taints}})

    # Pods of schedulers Lapilli does not serve, kept pending by a selector no node matches.
    default_pod = await _pod(control_plane, pool.namespace, "default-sched", {
        **pool.pod_spec({"cpu": "100m"}, "default-scheduler"), "nodeSelector": NOWHERE})
    pool.pods.append("default-sched")
    system_pod = await _pod(control_plane, "kube-system", SYSTEM_POD, {
        **pool.pod_spec({"cpu": "100m"}, "default-scheduler"), "nodeSelector": NOWHERE})
    # A Volcano pod kube-scheduler cannot place (its gang needs two members, one exists), so it stays pending.
    [lone_name] = await pool.gang("lone", 1, GPU1, min_member=2)
    lone = await client.get(PODS, lone_name, pool.namespace)
    # A plain Volcano pod: nowhere to go either (no GPU left on `full`, `tainted` untolerated).
    single = await _pod(control_plane, pool.namespace, "single", pool.pod_spec(GPU1, "volcano"))
    pool.pods.append("single")
    before = await verbs.refusals()

    attacks = [
        (default_pod, full, None, "scheduler-name", "which Lapilli does not serve"),
        (system_pod, full, None, "scheduler-name", "which Lapilli does not serve"),
        (lone, tainted, None, "node-taint", "attack=no:NoSchedule"),
        (lone, "no-such-node", None, "node-not-found", "does not exist"),
        (lone, full, "00000000-0000-0000-0000-000000000000", "uid-mismatch", "recreated"),
        (lone, full, None, "not-planned", "not planned by a session"),
        (single, full, None, "no-room", "nvidia.com/gpu 0 free, 1000 requested"),
    ]
    for pod, target, uid, reason, says in attacks:
        error = await verbs.bind(pod, target, uid)
        assert error.startswith("lapilli: bind refused: ") and says in error, (reason, error)
        assert "\n" not in error
        assert await _unbound(control_plane, pod), f"{reason}: the pod was bound"

    after = await verbs.refusals()
    counted = {r: after.get(r, 0.0) - before.get(r, 0.0) for r in after}
    assert {r: n for r, n in counted.items() if n} == {
        "scheduler-name": 2, "node-taint": 1, "node-not-found": 1, "uid-mismatch": 1, "not-planned": 1, "no-room": 1}


async def test_what_kube_scheduler_chooses_is_still_bound(pool: Pool, control_plane: DevCluster):
    await pool.add_nodes(2, gpus=1)
    pods = await pool.gang("ok", 2, GPU1)
    assert await eventually(lambda: _all_placed(pool, pods), timeout_s=60)


async def _all_placed(pool: Pool, pods: list[str]) -> bool:
    return len(await pool.placed(pods)) == len(pods)

