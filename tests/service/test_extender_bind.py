"""The bind verb's authorisation over HTTP: each attack of issue 12 (and its neighbours) is answered 200 with a
reason in `Error`, counted by reason, and never reaches the write client; what kube-scheduler really asks is bound.
Filter, prioritize and preempt answers name no pod of another namespace.

The real control plane versions of the attacks are in tests/e2e/test_extender_bind.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from extender.service.http import make_app
from lapilli.kube import ConfigError
from lapilli.kube.errors import ApiError
from tests.service.extender_state import BindFails, RecordingClient, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}
SECRET = "secret-training-run-7"  # a pod name of another namespace that no answer may show


SECRET_UID = "7d1e0c52-0000-4000-8000-000000000007"


def _with_uid(doc: dict, uid: str) -> dict:
    doc["metadata"]["uid"] = uid
    return doc


def _objects() -> list[dict]:
    docs = [node({"name": "free", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "3"}}),
            node({"name": "full", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}}),
            node({"name": "tainted", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2"},
                  "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}),
            node({"name": "cordoned", "alloc": {"cpu": "8", "memory": "16Gi"}, "unschedulable": True}),
            node({"name": "down", "alloc": {"cpu": "8", "memory": "16Gi"}, "ready": False}),
            queue({"name": "default"}),
            podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"}),
            volcano_pod({"name": "ml/solo", "req": GPU}),
            volcano_pod({"name": "ml/pair", "req": {"cpu": "1", "nvidia.com/gpu": "2"}}),
            volcano_pod({"name": "ml/bound", "req": GPU, "node": "free", "phase": "Running"}),
            _with_uid(volcano_pod({"name": f"other/{SECRET}", "req": GPU, "node": "full", "phase": "Running"}),
                      SECRET_UID),
            pod({"name": "ml/plain-default", "req": {"cpu": "1"}}),
            pod({"name": "kube-system/coredns-x", "req": {"cpu": "1"}})]
    docs += [volcano_pod({"name": f"ml/g-w-{i}", "group": "g", "req": GPU}) for i in range(2)]
    return docs


class LookupFails(RecordingClient):
    """The API server answers the pod lookup with an error (403, 400, 431 were seen)."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict:
        raise ApiError(self.status, "Forbidden", f"pods {name!r} is forbidden")


@pytest.fixture
async def served(aiohttp_client):
    client = RecordingClient()
    extender = make_extender(_objects(), client)
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    return http, extender, client


async def _bind(http: Any, name: str, node_name: str, uid: str | None = None, namespace: str = "ml") -> str:
    body = {"PodName": name, "PodNamespace": namespace, "PodUID": f"{namespace}-{name}" if uid is None else uid,
            "Node": node_name}
    resp = await http.post("/extender/gang/bind", json=body)
    assert resp.status == 200, await resp.text()
    return str((await resp.json())["Error"])


def _refusals(extender: Any) -> dict[str, float]:
    return {s.labels["reason"]: s.value for m in extender.metrics.bind_refusals.collect() for s in m.samples
            if s.name.endswith("_total")}


@pytest.mark.parametrize(("name", "namespace", "node_name", "uid", "reason", "says"), [
    ("plain-default", "ml", "free", None, "scheduler-name", "scheduler 'default-scheduler'"),
    ("coredns-x", "kube-system", "free", None, "scheduler-name", "Lapilli does not serve"),
    ("solo", "ml", "tainted", None, "node-taint", "dedicated=infra:NoSchedule"),
    ("solo", "ml", "full", None, "no-room", "nvidia.com/gpu 0 free, 1000 requested"),
    ("solo", "ml", "nowhere", None, "node-not-found", "node nowhere does not exist"),
    ("solo", "ml", "free", "not-its-uid", "uid-mismatch", "not not-its-uid"),
    ("solo", "ml", "free", "", "invalid", "PodUID is empty"),
    ("solo", "ml", "cordoned", None, "node-unschedulable", "cordoned"),
    ("solo", "ml", "down", None, "node-not-ready", "not Ready"),
    ("..", "ml", "free", None, "invalid", "is not a Kubernetes object name"),
    ("solo", "..", "free", None, "invalid", "is not a namespace name"),
    ("solo", "ml", "../../nodes/x", None, "invalid", "Node '../../nodes/x'"),
    ("bound", "ml", "full", None, "already-bound", "already bound to free"),
    ("g-w-0", "ml", "full", None, "not-planned", "gang ml/g"),
])
async def test_each_attack_is_refused_with_its_reason_and_reaches_no_api(
    served, name, namespace, node_name, uid, reason, says
):
    http, extender, client = served
    error = await _bind(http, name, node_name, uid, namespace)
    assert error.startswith("lapilli: bind refused: ") and says in error, error
    assert "\n" not in error
    assert client.calls == [] or all(c[0] != "bind" for c in client.calls)
    assert _refusals(extender) == {reason: 1.0}


async def test_what_kube_scheduler_would_choose_is_bound(served):
    http, extender, client = served
    assert await _bind(http, "solo", "free") == ""
    assert ("bind", ("ml", "solo", "free")) in client.calls
    assert await _bind(http, "bound", "free") == "", "a repeated bind of a pod already there succeeds"
    assert [c for c in client.calls if c[0] == "bind"] == [("bind", ("ml", "solo", "free"))]
    assert _refusals(extender) == {}


async def test_a_gang_binds_only_to_its_plan_and_parked_members_take_room(served):
    http, extender, client = served
    planned = [extender.plan.node_for(f"ml/g-w-{i}") for i in range(2)]
    assert planned == ["free", "free"]  # 3 GPUs, one taken by ml/bound: room for the gang's two
    first = asyncio.create_task(_bind(http, "g-w-0", "free"))
    await asyncio.sleep(0.05)
    assert not first.done(), "parked until the gang is whole"
    # Two GPUs look free in the cache, but the parked member holds one of them.
    assert "nvidia.com/gpu 1000 free, 2000 requested" in await _bind(http, "pair", "free")
    assert await _bind(http, "g-w-1", "free") == ""
    assert await first == ""
    assert sorted(c[1] for c in client.calls if c[0] == "bind") == [("ml", "g-w-0", "free"), ("ml", "g-w-1", "free")]


async def test_a_lookup_the_api_server_refuses_is_an_answer_not_a_500(aiohttp_client):
    for status in (403, 400, 431):
        client = LookupFails(status)
        extender = make_extender(_objects(), client)
        http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
        error = await _bind(http, "not-in-the-cache", "free")
        assert error.startswith("lapilli: bind refused: looking up pod ml/not-in-the-cache: "), error
        assert _refusals(extender) == {"pod-lookup-failed": 1.0}


async def test_answers_name_no_pod_of_another_namespace(served):
    http, _, _ = served
    nodes = ["free", "full", "tainted", "cordoned", "down", "nowhere"]
    asked = [volcano_pod({"name": "ml/solo", "req": GPU}), volcano_pod({"name": "ml/g-w-0", "group": "g", "req": GPU}),
             volcano_pod({"name": "ml/new", "group": "absent", "req": GPU}),
             volcano_pod({"name": "ml/huge", "req": {"nvidia.com/gpu": "64"}})]
    for asking in asked:
        for verb in ("filter", "prioritize"):
            resp = await http.post(f"/extender/{verb}", json={"Pod": asking, "NodeNames": nodes, "Nodes": None})
            assert SECRET not in await resp.text()
        victims = {"full": {"Pods": [{"UID": SECRET_UID}], "NumPDBViolations": 0}}
        resp = await http.post("/extender/preempt", json={"Pod": asking, "NodeNameToMetaVictims": victims})
        assert SECRET not in await resp.text()


@pytest.mark.parametrize(("error", "says"), [
    (ApiError(500, "InternalError", "etcdserver: request timed out\nretry later"), "500 InternalError: etcdserver"),
    (aiohttp.ServerDisconnectedError(), "ServerDisconnectedError: Server disconnected"),
    (aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443"), "ClientConnectionError: Cannot connect"),
    (TimeoutError(), "TimeoutError"),
    (ConfigError("kubeconfig ~/.kube/config: exec plugin exited with 1"), "ConfigError: kubeconfig"),
])
async def test_a_bind_the_api_server_does_not_take_is_an_answer_not_a_500(aiohttp_client, error, says):
    """A pod outside a gang is bound at once: its failed POST is the verb's `Error`, on one line."""
    client = BindFails(error)
    extender = make_extender(_objects(), client)
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    answer = await _bind(http, "solo", "free")
    assert answer.startswith("binding ml/solo to free: ") and says in answer, answer
    assert "\n" not in answer
    assert ("bind", ("ml", "solo", "free")) in client.calls
    assert _refusals(extender) == {}
    assert extender._inflight == {}, "the failed bind no longer holds room on the node"


async def test_a_verb_that_fails_unexpectedly_answers_error_not_500(served, caplog):
    """The last resort: whatever escapes a verb is answered 200 with a one-line `Error` (the traceback is
    logged, the failure counted), since kube-scheduler shows `Error`, not the body of a 500."""
    http, extender, _ = served

    async def broken(args: Any) -> Any:
        raise RuntimeError("a bug\nacross lines")

    extender.bind = broken  # type: ignore[method-assign]
    body = {"PodName": "solo", "PodNamespace": "ml", "PodUID": "ml-solo", "Node": "free"}
    with caplog.at_level("ERROR", logger="lapilli.extender"):
        resp = await http.post("/extender/gang/bind", json=body)
    assert resp.status == 200
    assert (await resp.json()) == {"Error": "lapilli: bind failed: RuntimeError: a bug across lines"}
    assert any(r.exc_info and "bind: failed" in r.getMessage() for r in caplog.records)
    counted = {s.labels["verb"]: s.value for m in extender.metrics.verb_failures.collect() for s in m.samples
               if s.name.endswith("_total")}
    assert counted == {"bind": 1.0}
