"""`lapilli job why` under restricted RBAC (assembly/why): what the credentials cannot read is recorded with the HTTP
status, the answer says it is partial and shows the service's own condition; nothing falls back silently."""

from __future__ import annotations

import json
from typing import Any

from assembly.why.answer import Answer, why
from assembly.why.gather import SHIPPED_CONF, Unreadable, read_cluster, read_conf
from lapilli.kube.client import ObjectList
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.resources import Resource
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.explain.test_explain import gang, gpu_nodes, scenario

WHY = {"type": "lapilli.io/Why", "status": "True", "reason": "OverCapability",
       "message": "1. needs nvidia.com/gpu 4; queue lab-a may use 2 more of its capability 4",
       "lastTransitionTime": "2026-01-01T00:00:00Z"}


class _Client:
    """Answers as the API server does for a user with a Role in namespace `u` only."""

    def __init__(self, objects: list[dict[str, Any]], configmap: ApiError) -> None:
        self.objects, self.configmap = objects, configmap

    async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> ObjectList:
        if namespace != "u" or not res.namespaced:
            raise ApiError(403, "Forbidden", f"cannot list {res.plural}")
        return ObjectList([o for o in self.objects if o["kind"] == res.kind], "1")

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise self.configmap


def _objects() -> list[dict[str, Any]]:
    docs = documents(scenario(gang("u/big", 4, "lab-a", phase="Pending"), nodes=gpu_nodes(1),
                              queues=[{"name": "lab-a"}]))
    for doc in docs:
        if doc["kind"] == "PodGroup":
            doc.setdefault("status", {})["conditions"] = [WHY]
    return docs


async def test_a_namespaced_role_gives_a_partial_answer_with_the_schedulers_condition() -> None:
    client = _Client(_objects(), ApiError(403, "Forbidden", "cannot get configmaps"))
    view = await read_cluster(client, "u")  # type: ignore[arg-type]
    conf = await read_conf(client, None)  # type: ignore[arg-type]
    assert set(view.snapshot.podgroups) == {"u/big"} and not view.snapshot.nodes
    assert [str(u) for u in view.unreadable] == [
        "HyperNode (cluster): 403 Forbidden", "Node (cluster): 403 Forbidden", "Pod (namespaces other than u): 403 Forbidden",
        "PodGroup (namespaces other than u): 403 Forbidden", "PriorityClass (cluster): 403 Forbidden",
        "Queue (cluster): 403 Forbidden"]
    assert conf.unreadable == Unreadable("ConfigMap", "lapilli-system/lapilli-scheduler-conf", 403, "Forbidden")
    assert conf.where == "manifests/scheduler/lapilli-scheduler.conf" and SHIPPED_CONF.is_file()
    answer = Answer.of(view, conf, why(view, conf.conf, "u/big"))
    data = json.loads(json.dumps(answer.to_json()))
    assert data["partial"] is True
    assert {(u["kind"], u["status"]) for u in data["unreadable"]} >= {("Node", 403), ("Queue", 403), ("ConfigMap", 403)}
    assert data["scheduler_condition"]["reason"] == "OverCapability"
    text = answer.render()
    assert ("PARTIAL ANSWER: your credentials could not read HyperNode (cluster): 403 Forbidden; Node (cluster): 403 "
            "Forbidden; ") in text
    assert ("the scheduler's own answer (condition lapilli.io/Why of 2026-01-01T00:00:00Z): OverCapability: "
            "1. needs nvidia.com/gpu 4") in text


async def test_full_read_access_is_not_partial_and_a_missing_configmap_is_no_gap() -> None:
    class Admin(_Client):
        async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> ObjectList:
            return ObjectList([o for o in self.objects if o["kind"] == res.kind], "1")

    client = Admin(_objects(), NotFound(404, "NotFound", "no such ConfigMap"))
    view, conf = await read_cluster(client, "u"), await read_conf(client, None)  # type: ignore[arg-type]
    answer = Answer.of(view, conf, why(view, conf.conf, "u/big"))
    assert not view.unreadable and conf.unreadable is None and not answer.partial
    assert "PARTIAL" not in answer.render() and "lapilli.io/Why" not in answer.render()
    assert answer.to_json()["scheduler_condition"] == {k: WHY[k] for k in
                                                       ("status", "reason", "message", "lastTransitionTime")}



async def test_a_kind_the_cluster_does_not_serve_is_no_gap() -> None:
    """HyperNodes on a cluster without their CRD (404): none exists, so nothing is hidden and the answer is exact."""
    class NoTopology(_Client):
        async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> ObjectList:
            if res.kind == "HyperNode":
                raise NotFound(404, "NotFound", "the server could not find the requested resource")
            return ObjectList([o for o in self.objects if o["kind"] == res.kind], "1")

    client = NoTopology(_objects(), NotFound(404, "NotFound", "no such ConfigMap"))
    view, conf = await read_cluster(client, "u"), await read_conf(client, None)  # type: ignore[arg-type]
    assert view.unreadable == [] and view.objects["HyperNode"] == {}
    assert not Answer.of(view, conf, why(view, conf.conf, "u/big")).partial
