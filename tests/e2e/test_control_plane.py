"""The control plane itself, for real: nodes Ready, kube-scheduler binds, the simulated kubelet runs pods
to completion, failure, deletion and eviction; the reflector against kube-apiserver; the CRDs served with
Volcano's printer columns; the standing queues."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import orjson
import pytest

from assembly.dev import DevCluster
from assembly.dev.nodes import NodeShape, is_ready, parse_taint
from assembly.dev.waits import wait_for
from lapilli.cluster import Event, Reflector
from lapilli.kube import ApiError, Conflict, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS, CSI_NODES, NODES, POD_TEMPLATES, PODS, QUEUES

NS = "e2e-control-plane"


def phase(name: str):
    return lambda pod: pod is not None and (pod.get("status") or {}).get("phase") == name


def gone(obj: dict[str, Any] | None) -> bool:
    return obj is None


def pod_manifest(
    name: str, *, annotations: dict[str, str] | None = None, scheduler: str | None = None, gpus: int = 0,
    node: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        "restartPolicy": "Never",
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}}, "spec": spec}


@pytest.fixture(scope="module")
async def api(control_plane: DevCluster) -> KubeClient:
    await control_plane.ensure_namespace(NS)
    assert control_plane.client is not None
    return control_plane.client


async def test_nodes_are_ready_with_gpus(control_plane: DevCluster, api: KubeClient):
    nodes = (await api.list(NODES, label_selector="sim.lapilli.io/simulated=true")).items
    assert len(nodes) == control_plane.spec.nodes
    for node in nodes:
        assert is_ready(node), node["spec"]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["status"]["allocatable"]["pods"] == "110"
    # The CSINode a kubelet registers beside its node, owned by it (kube-scheduler's CSI limit filter reads it).
    csinodes = {c["metadata"]["name"]: c for c in (await api.list(CSI_NODES)).items}
    for node in nodes:
        owner = csinodes[node["metadata"]["name"]]["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"]) == ("Node", node["metadata"]["uid"])


async def test_default_scheduler_binds_and_kubelet_runs_to_success(api: KubeClient):
    await api.create(PODS, pod_manifest("runs-ok", annotations={"sim.lapilli.io/duration": "1s"}, gpus=1))
    running = await wait_for(api, PODS, "runs-ok", NS, until=phase("Running"), timeout_s=30)
    assert running is not None
    status = running["status"]
    assert running["spec"]["nodeName"].startswith("sim-node-")  # bound by the real kube-scheduler
    assert status["podIP"].startswith("10.") and status["hostIP"].startswith("172.16.")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"]
    done = await wait_for(api, PODS, "runs-ok", NS, until=phase("Succeeded"), timeout_s=30)
    assert done is not None
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_volcano_profile_schedules_too(api: KubeClient):
    await api.create(PODS, pod_manifest("volcano-profile", scheduler="volcano"))
    pod = await wait_for(api, PODS, "volcano-profile", NS, until=phase("Running"), timeout_s=30)
    assert pod is not None and pod["spec"]["nodeName"]


async def test_exit_code_fails_the_pod(api: KubeClient):
    notes = {"sim.lapilli.io/duration": "500ms", "sim.lapilli.io/exit-code": "3"}
    await api.create(PODS, pod_manifest("exits-3", annotations=notes))
    failed = await wait_for(api, PODS, "exits-3", NS, until=phase("Failed"), timeout_s=30)
    assert failed is not None
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")


async def test_graceful_deletion_is_finished_by_the_kubelet(api: KubeClient):
    await api.create(PODS, pod_manifest("deleted"))
    await wait_for(api, PODS, "deleted", NS, until=phase("Running"), timeout_s=30)
    await api.delete(PODS, "deleted", NS)  # default grace period (30 s): only a kubelet finishes it sooner
    await wait_for(api, PODS, "deleted", NS, until=gone, timeout_s=10)


async def test_eviction_is_honoured(api: KubeClient):
    await api.create(PODS, pod_manifest("evicted"))
    await wait_for(api, PODS, "evicted", NS, until=phase("Running"), timeout_s=30)
    answer = await api.evict(NS, "evicted")
    assert answer.get("status") == "Success"
    await wait_for(api, PODS, "evicted", NS, until=gone, timeout_s=10)


async def test_raw_bind_answers_status_and_delete_preconditions(control_plane: DevCluster, api: KubeClient):
    # A pod for a scheduler that does not exist stays unbound until we bind it ourselves.
    pod = await api.create(PODS, pod_manifest("bound-by-hand", scheduler="nobody"))
    node = (await api.list(NODES)).items[0]["metadata"]["name"]
    answer = await api.bind(NS, "bound-by-hand", node, uid=pod["metadata"]["uid"])
    assert (answer["kind"], answer["status"]) == ("Status", "Success")
    running = await wait_for(api, PODS, "bound-by-hand", NS, until=phase("Running"), timeout_s=30)
    assert running is not None and running["spec"]["nodeName"] == node
    with pytest.raises(Conflict):
        await api.delete(PODS, "bound-by-hand", NS, uid=str(uuid.uuid4()))
    await api.delete(PODS, "bound-by-hand", NS, grace_period_seconds=0, uid=pod["metadata"]["uid"])
    with pytest.raises(NotFound):
        await api.get(PODS, "bound-by-hand", NS)


async def test_added_node_with_taint_is_ready_and_keeps_its_taint(control_plane: DevCluster, api: KubeClient):
    shape = NodeShape(cpu="8", memory="32Gi", gpus=0, labels={"pool": "cpu"},
                      taints=(parse_taint("dedicated=batch:NoSchedule"),))
    node = await control_plane.add_node("e2e-extra-node", shape)
    assert is_ready(node)
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    # The kubelet repairs a node that falls back to not-ready.
    await api.patch(NODES, "e2e-extra-node", {"spec": {"taints": [
        *node["spec"]["taints"], {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}})
    repaired = await wait_for(api, NODES, "e2e-extra-node", until=lambda n: n is not None and is_ready(n))
    assert repaired is not None and repaired["spec"]["taints"][0]["key"] == "dedicated"


async def test_patch_flavours_and_errors(api: KubeClient):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flavours", "namespace": NS},
          "data": {"a": "1"}}
    await api.create(CONFIG_MAPS, cm)
    await api.patch(CONFIG_MAPS, "flavours", {"data": {"b": "2"}}, NS)
    await api.patch(CONFIG_MAPS, "flavours", {"metadata": {"labels": {"x": "y"}}}, NS, patch_type="strategic")
    merged = await api.patch(CONFIG_MAPS, "flavours", [{"op": "remove", "path": "/data/a"}], NS, patch_type="json")
    assert merged["data"] == {"b": "2"} and merged["metadata"]["labels"] == {"x": "y"}
    with pytest.raises(ApiError) as err:
        await api.patch(CONFIG_MAPS, "flavours", [{"op": "remove", "path": "/data/nope"}], NS, patch_type="json")
    assert err.value.status == 422 and err.value.reason == "Invalid"
    with pytest.raises(NotFound):
        await api.get(CONFIG_MAPS, "missing", NS)


async def test_paged_list_returns_everything(api: KubeClient):
    names = [f"page-{i:02d}" for i in range(25)]
    await asyncio.gather(*(api.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": n, "namespace": NS,
                                                                  "labels": {"paged": "yes"}}}) for n in names))
    listed = await api.list(CONFIG_MAPS, NS, label_selector="paged=yes", page_size=4)
    assert sorted(o["metadata"]["name"] for o in listed.items) == names
    assert all(o["kind"] == "ConfigMap" for o in listed.items) and int(listed.resource_version) > 0


async def test_reflector_follows_and_relists_after_gone(control_plane: DevCluster, api: KubeClient):
    def template(name: str, image: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": name, "namespace": NS, "labels": {"reflected": "yes"}},
                "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}

    for name in ("keep", "change", "drop"):
        await api.create(POD_TEMPLATES, template(name, "a"))
    events: list[Event] = []
    reflector = Reflector(api, POD_TEMPLATES, namespace=NS, label_selector="reflected=yes", handlers=[events.append])
    reflector.start()
    await asyncio.wait_for(reflector.synced.wait(), 10)
    await api.create(POD_TEMPLATES, template("live", "a"))
    await _until(lambda: f"{NS}/live" in reflector.store)
    assert [(e.type, e.synthetic) for e in events][-1] == ("ADDED", False)

    # While it is stopped: one change, one deletion, one addition, then etcd compacts the history it needs.
    await reflector.stop()
    await api.patch(POD_TEMPLATES, "change", {"template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}},
                    NS, patch_type="strategic")
    await api.delete(POD_TEMPLATES, "drop", NS)
    await api.create(POD_TEMPLATES, template("new", "a"))
    await control_plane.compact_etcd()
    seen = len(events)
    reflector.start()  # resumes its watch from the compacted resourceVersion: the server answers 410 Gone
    try:
        await _until(lambda: reflector.relists == 2)
    finally:
        await reflector.stop()
    relisted = {(e.type, e.obj["metadata"]["name"]) for e in events[seen:]}
    assert relisted == {("MODIFIED", "change"), ("DELETED", "drop"), ("ADDED", "new")}
    assert all(e.synthetic for e in events[seen:]) and reflector.restarts == 1
    assert sorted(reflector.store) == [f"{NS}/{n}" for n in ("change", "keep", "live", "new")]


async def _until(check, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not check():
            await asyncio.sleep(0.05)


async def test_standing_queues_are_open(api: KubeClient):
    root, default = await api.get(QUEUES, "root"), await api.get(QUEUES, "default")
    assert (root["spec"]["reclaimable"], root["spec"]["weight"], root["status"]["state"]) == (False, 1, "Open")
    assert (default["spec"]["reclaimable"], default["spec"]["weight"], default["status"]["state"]) == (True, 1, "Open")


async def _table_columns(api: KubeClient, path: str) -> list[str]:
    """The column names kube-apiserver serves for `kubectl get` (a meta.k8s.io Table)."""
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
               "Authorization": f"Bearer {api.config.bearer_token()}"}
    async with aiohttp.ClientSession() as http, http.get(
        api.config.server + path, headers=headers, ssl=api.config.ssl_context()
    ) as resp:
        assert resp.status == 200, await resp.text()
        table = orjson.loads(await resp.read())
    return [c["name"] for c in table["columnDefinitions"]]


@pytest.mark.parametrize(
    ("path", "columns"),
    [
        ("/apis/batch.volcano.sh/v1alpha1/jobs", ["Name", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE", "QUEUE"]),
        ("/apis/scheduling.volcano.sh/v1beta1/podgroups", ["Name", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]),
        ("/apis/scheduling.volcano.sh/v1beta1/queues", ["Name", "STATE", "WEIGHT", "PARENT", "AGE"]),
    ],
)
async def test_crds_served_with_volcano_printer_columns(api: KubeClient, path: str, columns: list[str]):
    assert await _table_columns(api, path) == columns


async def test_short_names_resolve_through_kubectl(control_plane: DevCluster):
    out = set(control_plane.kubectl("get", "q", "-o", "name").stdout.split())
    # Other tests of the session add queues of their own; the harness's two must always be there.
    assert {"queue.scheduling.volcano.sh/default", "queue.scheduling.volcano.sh/root"} <= out
    for short in ("vcjob", "vj", "pg", "podgroup-v1beta1", "queue-v1beta1"):
        control_plane.kubectl("get", short, "-A")


async def test_kubelet_heartbeats_nodes(control_plane: DevCluster, api: KubeClient):
    def heartbeat(node: dict[str, Any] | None) -> str:
        assert node is not None
        return next(c["lastHeartbeatTime"] for c in node["status"]["conditions"] if c["type"] == "Ready")

    name = "sim-node-000"
    before = heartbeat(await api.get(NODES, name))
    # One heartbeat per node per period (10 s in this session), paced across the nodes.
    after = await wait_for(api, NODES, name, until=lambda n: heartbeat(n) != before,
                           timeout_s=control_plane.spec.heartbeat_s + 10)
    assert heartbeat(after) > before
