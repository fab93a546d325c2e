"""The PodGroup controller's writes for a plain pod: the PodGroup at once; the pod's group-name annotation left to
its Binding while kube-scheduler is placing it, patched at once when the Binding will not bring it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prometheus_client import CollectorRegistry

from controller.context import Context
from controller.metrics import ControllerMetrics
from controller.podgroups import controller as podgroups_controller
from controller.podgroups.controller import ANNOTATE_AFTER_S, PodGroupController
from controller.settings import ControllerSettings
from lapilli.cluster import Event as WatchEvent
from lapilli.times import rfc3339
from tests.unit.controller.podgroups.test_plain import bare_pod

GROUP = "scheduling.k8s.io/group-name"


class Writes:
    """The write client: records creates and patches, answers with what it was sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def create(self, res: Any, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("create", res.kind, obj))
        return obj

    async def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("patch", res.kind, patch))
        return {"metadata": {"name": name, "namespace": namespace, "annotations": patch["metadata"]["annotations"]}}


def _controller() -> tuple[PodGroupController, Writes]:
    client = Writes()
    ctx = Context(client, ControllerSettings(), None, ControllerMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    return PodGroupController(ctx), client


def _pod(age_s: float = 0.0, **changes: Any) -> dict[str, Any]:
    pod = bare_pod(creationTimestamp=rfc3339(time.time() - age_s))
    pod.setdefault("status", {}).update(changes.pop("status", {}))
    pod["spec"].update(changes)
    return pod


async def _sync(pod: dict[str, Any]) -> tuple[PodGroupController, Writes]:
    controller, client = _controller()
    controller.ctx.pods.observe("ADDED", pod)
    await controller._sync("ns/p")
    return controller, client


async def test_a_pod_kube_scheduler_is_placing_gets_its_podgroup_and_no_patch_of_its_own(monkeypatch) -> None:
    # creationTimestamp has whole seconds, so a pod made now may read up to a second old: it is stamped a second
    # ahead, and the wait is long enough that a slow first sync on a loaded machine still finds time left.
    monkeypatch.setattr(podgroups_controller, "ANNOTATE_AFTER_S", 3.0)
    controller, client = await _sync(_pod(age_s=-1.0))
    assert [(verb, kind) for verb, kind, _ in client.calls] == [("create", "PodGroup")]
    assert client.calls[0][2]["metadata"]["name"] == "podgroup-pod-uid"
    assert len(controller.queue) == 0
    # It is looked at again once ANNOTATE_AFTER_S is up: a pod still waiting then gets the patch (one its Binding
    # named meanwhile wants nothing more).
    async with asyncio.timeout(15):
        while not len(controller.queue):
            await asyncio.sleep(0.01)
    controller.ctx.podgroups.observe("ADDED", client.calls[0][2])
    await controller._process(await controller.queue.get())
    assert [(verb, kind) for verb, kind, _ in client.calls] == [("create", "PodGroup"), ("patch", "Pod")]


async def test_the_annotation_is_patched_at_once_when_no_binding_will_bring_it() -> None:
    unschedulable = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    for pod in (_pod(nodeName="n1"),  # bound without it
                _pod(status=unschedulable),  # kube-scheduler set it aside
                _pod(age_s=ANNOTATE_AFTER_S + 1)):  # waited long enough
        _, client = await _sync(pod)
        assert [(verb, kind) for verb, kind, _ in client.calls] == [("create", "PodGroup"), ("patch", "Pod")]
        assert client.calls[1][2] == {"metadata": {"annotations": {GROUP: "podgroup-pod-uid"}}}


async def test_a_member_of_a_larger_podgroup_is_annotated_at_once() -> None:
    controller, client = _controller()
    controller.ctx.pods.observe("ADDED", _pod())
    controller.ctx.podgroups.observe("ADDED", {"metadata": {"name": "podgroup-pod-uid", "namespace": "ns"},
                                               "spec": {"minMember": 3}})
    await controller._sync("ns/p")
    assert [(verb, kind) for verb, kind, _ in client.calls] == [("patch", "Pod")]


async def test_a_pod_whose_binding_named_its_podgroup_first_gets_it_made() -> None:
    named = _pod(nodeName="n1")
    named["metadata"]["annotations"] = {GROUP: "podgroup-pod-uid"}
    controller, client = _controller()
    controller.on_pod(WatchEvent("MODIFIED", named))
    assert len(controller.queue) == 1
    controller.ctx.pods.observe("ADDED", named)
    await controller._process(await controller.queue.get())
    assert [(verb, kind) for verb, kind, _ in client.calls] == [("create", "PodGroup")]
    controller.ctx.podgroups.observe("ADDED", client.calls[0][2])
    controller.on_pod(WatchEvent("MODIFIED", named))
    assert len(controller.queue) == 0, "made: nothing more to do"
    other = _pod()
    other["metadata"]["annotations"] = {GROUP: "the-users-own"}
    controller.on_pod(WatchEvent("ADDED", other))
    assert len(controller.queue) == 0, "a PodGroup the pod names itself is not this controller's to make"
