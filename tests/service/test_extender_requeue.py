"""kube-scheduler's queue after a refusal: the gang members the extender turned away come back together.

kube-scheduler sets a pod it could not place aside until the pod changes (or its 60 s unschedulable flush); the
extender touches such pods (annotation `lapilli.io/planned`) once their gang has a plan. A gang whose permit timed out
at bind must get the same: its refused members and the ones that never reached bind are touched together once it is
planned again. Before, nothing touched them, each came back on its own flush, and gangs kept missing each other's
permit window (seen at 1,000 nodes: five gangs timed out again and again for minutes after a restart). So must a
member refused at bind for want of a plan (a plan dropped meanwhile, a new leader not synced yet).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from extender.service.component import ExtenderComponent
from extender.service.loop import PLANNED_ANNOTATION
from extender.service.settings import ExtenderSettings
from extender.service.wire import ExtenderBindingArgs
from tests.service.extender_state import RecordingClient, feed, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


def _touches(client: RecordingClient) -> list[tuple[str, str]]:
    """(pod, value written) of each patch with the planned annotation, in order."""
    return [(f"{ns}/{name}", body["metadata"]["annotations"][PLANNED_ANNOTATION])
            for (verb, (_kind, ns, name)), (_v, _k, body) in zip(client.calls, client.bodies, strict=True)
            if verb == "patch" and PLANNED_ANNOTATION in body["metadata"]["annotations"]]


def _touched(client: RecordingClient) -> list[str]:
    """The pods patched with the planned annotation, in order."""
    return [pod for pod, _value in _touches(client)]


async def test_a_gang_whose_permit_timed_out_is_touched_whole_once_it_is_planned_again(tmp_path: Path):
    client = RecordingClient()
    settings = ExtenderSettings(session_process=False, permit_timeout_s=0.2, why_interval_s=0)
    component = ExtenderComponent(settings, client, registry=None)  # type: ignore[arg-type]
    for reflector in component.state.reflectors:
        reflector.synced.set()
    for doc in [node({"name": "n1", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
                queue({"name": "default"}), podgroup({"name": "ml/g", "min": 3, "phase": "Inqueue"}),
                *[volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU}) for i in range(3)]]:
        feed(component.state, doc)
    loop = component.loop
    await loop.run_once()
    assert set(component.plan.gangs) == {"ml/g"} and _touched(client) == []  # nothing was turned away yet

    # Two members reach bind; the third never does (kube-scheduler holds it aside): the permit times out.
    parked = [asyncio.create_task(component.permit.park("ml/g", 3, 0, "ml", f"g-{i}", f"ml-g-{i}", "n1"))
              for i in range(2)]
    answers = await asyncio.gather(*parked)
    assert all("reached bind" in a for a in answers) and "ml/g" not in component.plan.gangs

    await loop.run_once()  # planned again: every member not bound is touched, together
    assert "ml/g" in component.plan.gangs
    assert sorted(_touched(client)) == ["ml/g-0", "ml/g-1", "ml/g-2"]


async def test_a_member_refused_at_bind_for_want_of_a_plan_is_touched_once_its_gang_is_planned():
    """A plan dropped between filter and bind (a permit timeout, a node gone) or a bind reaching a new leader before
    its first plan: the member is refused at bind, and without a touch it would wait for kube-scheduler's flush."""
    client = RecordingClient()
    docs = [node({"name": "n1", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
            queue({"name": "default"}), podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"}),
            *[volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU}) for i in range(2)]]
    extender = make_extender(docs, client)
    await extender.loop.run_once()
    extender.plan.drop("ml/g")
    answer = await extender.bind(ExtenderBindingArgs(PodName="g-0", PodNamespace="ml", PodUID="ml-g-0", Node="n1"))
    assert "not planned" in answer.error
    await extender.loop.run_once()
    assert _touched(client) == ["ml/g-0"]  # the member refused; the other never came


async def test_a_restarted_leader_touches_with_a_value_its_predecessor_never_wrote():
    """A touch that writes the value the pod already holds is no event: kube-scheduler keeps the pod aside. Each
    process starts its plan versions afresh, so a restarted leader's first plan has the number its predecessor's
    had (seen: two of a parked gang's members kept aside after a restart, until the permit timed out)."""
    docs = [node({"name": "n1", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
            queue({"name": "default"}), podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"}),
            *[volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU}) for i in range(2)]]
    written: list[dict[str, str]] = []
    for _process in range(2):
        client = RecordingClient()
        extender = make_extender(docs, client)
        assert extender.loop.term()  # a term begins: every unbound member waits to be touched
        await extender.loop.run_once()
        written.append(dict(_touches(client)))
    first, second = written
    assert set(first) == set(second) == {"ml/g-0", "ml/g-1"}
    assert all(first[pod] != second[pod] for pod in first)
