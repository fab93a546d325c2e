"""Queues and plain pods on the real control plane: queue state through the CLI's Commands (Open, Closing,
Closed), PodGroup counts in `queue list`, and the PodGroup a pod for Volcano's scheduler gets when it names none."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from assembly.dev import DevCluster
from controller.podgroups.controller import ANNOTATE_AFTER_S
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import COMMANDS, PODGROUPS, PODS, QUEUES, Resource
from tests.e2e.test_controller_helpers import (
    apply,
    controllers_cluster,
    eventually,
    lapilli,
    remove_job,
    wait_phase,
)

NS = "e2e-controller-queues"
REPLICA_SETS = Resource("apps/v1", "replicasets", "ReplicaSet")
GROUP = "scheduling.k8s.io/group-name"


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    return await controllers_cluster(control_plane, NS)


@pytest.fixture(scope="module")
def api(cluster: DevCluster) -> KubeClient:
    assert cluster.client is not None
    return cluster.client


async def queue_state(api: KubeClient, name: str) -> str:
    try:
        return str(((await api.get(QUEUES, name)).get("status") or {}).get("state") or "")
    except NotFound:
        return "<gone>"


def job_in(queue: str, name: str) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"queue": queue, "schedulerName": "volcano",
                     "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [container]}}}]}}


async def test_queue_lifecycle_through_commands(cluster, api, tmp_path):
    name = f"q-{uuid.uuid4().hex[:6]}"
    assert lapilli(cluster, "queue", "create", "-n", name, "-w", "3").returncode == 0
    try:
        await eventually(lambda: _is(api, name, "Open"), 20, "a new queue is Open")
        assert (await api.get(QUEUES, name))["spec"]["parent"] == "root"
        apply(cluster, job_in(name, "queued"), tmp_path)
        await wait_phase(api, NS, "queued", "Running")

        async def counted() -> bool:
            listed = lapilli(cluster, "queue", "list").stdout
            row = next(line for line in listed.splitlines() if line.startswith(name + " "))
            return row.split()[5] == "1"

        await eventually(counted, 20, "queue list counts the running PodGroup")
        # As Volcano since v1.11: the controller persists the state only, no per-phase counters.
        status = (await api.get(QUEUES, name)).get("status") or {}
        assert not {"pending", "running", "inqueue", "unknown", "completed"} & set(status), status
        assert lapilli(cluster, "queue", "operate", "-n", name, "-a", "close").returncode == 0
        await eventually(lambda: _is(api, name, "Closing"), 20, "a closed queue with a PodGroup is Closing")
        listed = lapilli(cluster, "queue", "list").stdout
        row = next(line for line in listed.splitlines() if line.startswith(name + " "))
        assert row.split()[:8] == [name, "3", "Closing", "0", "0", "1", "0", "0"]
        assert not [c for c in (await api.list(COMMANDS, "default")).items
                    if c["target"]["name"] == name], "queue Commands are taken at once"
        await remove_job(api, NS, "queued")
        await eventually(lambda: _is(api, name, "Closed"), 20, "Closing becomes Closed once empty")
        assert lapilli(cluster, "queue", "operate", "-n", name, "-a", "open").returncode == 0
        await eventually(lambda: _is(api, name, "Open"), 20, "reopened")
        assert lapilli(cluster, "queue", "operate", "-n", name, "-a", "update", "-w", "5").returncode == 0
        got = lapilli(cluster, "queue", "get", "-n", name).stdout.splitlines()
        assert got[1].split()[:3] == [name, "5", "Open"]
    finally:
        await remove_job(api, NS, "queued")
        assert lapilli(cluster, "queue", "delete", "-n", name).returncode == 0
    assert await queue_state(api, name) == "<gone>"


async def _is(api: KubeClient, name: str, state: str) -> bool:
    return await queue_state(api, name) == state


async def test_standing_queues_exist_and_are_open(api):
    for name in ("root", "default"):
        assert await queue_state(api, name) == "Open"


def plain_pod(name: str, owner: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": NS, "annotations": {"volcano.sh/preemptable": "false"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}}]}}


async def test_a_bare_pod_gets_its_own_podgroup_which_goes_with_it(api):
    pod = await api.create(PODS, plain_pod("bare"))
    uid = pod["metadata"]["uid"]
    try:
        pg = await eventually(lambda: _podgroup(api, f"podgroup-{uid}"), 20, "the pod's PodGroup")
        assert pg["spec"]["minMember"] == 1 and pg["spec"]["minResources"]["cpu"] == "250m"
        assert pg["metadata"]["ownerReferences"][0]["uid"] == uid
        assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}

        async def annotated_and_running() -> bool:
            current = await api.get(PODS, "bare", NS)
            notes = current["metadata"].get("annotations") or {}
            running = (current.get("status") or {}).get("phase") == "Running"
            return notes.get("scheduling.k8s.io/group-name") == f"podgroup-{uid}" and running

        await eventually(annotated_and_running, 30, "pod annotated with its PodGroup and running")
    finally:
        await api.delete(PODS, "bare", NS)
    await eventually(lambda: _no_podgroup(api, f"podgroup-{uid}"), 30, "the PodGroup deleted with its pod")


async def test_a_bare_pods_podgroup_name_arrives_with_its_node(api):
    """Issue 19 item 2: no write of its own for the annotation of a pod kube-scheduler places at once; every
    version of the pod the API server stores either has no node and no group name, or both."""
    listed = await api.list(PODS, NS)
    versions: list[dict] = []

    async def follow() -> None:
        async for event in api.watch(PODS, NS, resource_version=listed.resource_version, timeout_seconds=60,
                                     allow_bookmarks=False):
            if event.object["metadata"]["name"] == "with-node":
                versions.append(event.object)

    watching = asyncio.create_task(follow())
    try:
        pod = await api.create(PODS, plain_pod("with-node"))
        name = f"podgroup-{pod['metadata']['uid']}"
        await eventually(lambda: _podgroup(api, name), 20, "the pod's PodGroup")

        async def running() -> bool:
            return any((v.get("status") or {}).get("phase") == "Running" for v in versions)

        await eventually(running, 30, "the pod running")
        seen = [(bool(v["spec"].get("nodeName")), (v["metadata"].get("annotations") or {}).get(GROUP))
                for v in versions]
        assert (True, name) in seen and not {(False, name), (True, None)} & set(seen), seen
    finally:
        watching.cancel()
        await api.delete(PODS, "with-node", NS)


async def test_a_pod_kube_scheduler_sets_aside_is_annotated_by_the_controller(api):
    """No Binding will name its PodGroup: the PodGroup controller patches it once kube-scheduler marks it
    unschedulable (well before ANNOTATE_AFTER_S)."""
    doc = plain_pod("too-big")
    doc["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5000"
    pod = await api.create(PODS, doc)
    try:
        async def annotated() -> bool:
            current = await api.get(PODS, "too-big", NS)
            return (current["metadata"].get("annotations") or {}).get(GROUP) == f"podgroup-{pod['metadata']['uid']}"

        await eventually(annotated, ANNOTATE_AFTER_S - 10, "the set-aside pod annotated")
        assert not (await api.get(PODS, "too-big", NS))["spec"].get("nodeName")
    finally:
        await api.delete(PODS, "too-big", NS, grace_period_seconds=0)


async def test_pods_of_one_owner_share_a_podgroup_sized_by_the_owner(api):
    rs = await api.create(REPLICA_SETS, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "gang-rs", "namespace": NS,
                     "annotations": {"scheduling.volcano.sh/group-min-member": "2", "volcano.sh/extra": "x"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "gang"}},
                 "template": {"metadata": {"labels": {"app": "gang"}},
                              "spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    })
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gang-rs", "uid": rs["metadata"]["uid"],
             "controller": True}
    try:
        for i in range(2):
            await api.create(PODS, plain_pod(f"gang-{i}", owner))
        name = f"podgroup-{rs['metadata']['uid']}"
        pg = await eventually(lambda: _podgroup(api, name), 20, "the owner's PodGroup")
        assert pg["spec"]["minMember"] == 2 and pg["spec"]["minResources"]["cpu"] == "500m"
        assert pg["metadata"]["annotations"]["volcano.sh/extra"] == "x"
        assert pg["metadata"]["ownerReferences"] == [owner]
        # Both end up in the one PodGroup and run. (Whether they were bound as one gang is the extender's call:
        # a pod it sees before the PodGroup controller annotated it is not held back today.)
        pods = await eventually(lambda: _running_gang(api), 60, "both pods annotated and running")
        assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods} == {name}
    finally:
        for i in range(2):
            with contextlib.suppress(NotFound):
                await api.delete(PODS, f"gang-{i}", NS, grace_period_seconds=0)
        await api.delete(REPLICA_SETS, "gang-rs", NS)
        await api.delete(PODGROUPS, f"podgroup-{rs['metadata']['uid']}", NS)


async def _podgroup(api: KubeClient, name: str) -> dict | None:
    try:
        return await api.get(PODGROUPS, name, NS)
    except NotFound:
        return None


async def _no_podgroup(api: KubeClient, name: str) -> bool:
    return await _podgroup(api, name) is None


async def _running_gang(api: KubeClient) -> list[dict] | None:
    pods = [await api.get(PODS, f"gang-{i}", NS) for i in range(2)]
    ready = all((p.get("status") or {}).get("phase") == "Running" for p in pods) and all(
        "scheduling.k8s.io/group-name" in (p["metadata"].get("annotations") or {}) for p in pods)
    return pods if ready else None

