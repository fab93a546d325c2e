"""A plain `volcano` pod's writes through the service (issue 19 item 2): its PodGroup name arrives with its Binding,
not in a patch of its own; until the annotation lands the pod counts in that PodGroup; and a gang's status is
written once it runs, not Inqueue first while its pods are on their way through bind."""

from __future__ import annotations

from typing import Any

import pytest

from extender.service.http import make_app
from extender.service.state import ClusterState
from lapilli.api.constants import GROUP_NAME_ANNOTATION
from tests.service.extender_state import RecordingClient, feed, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}
NAMES = ("volcano",)
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": True}


def _objects() -> list[dict[str, Any]]:
    owned = volcano_pod({"name": "ml/owned", "req": GPU})
    owned["metadata"]["ownerReferences"] = [RS]
    return [node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
            queue({"name": "default"}),
            volcano_pod({"name": "ml/bare", "req": GPU}), owned,
            podgroup({"name": "ml/named", "min": 1, "phase": "Inqueue"}),
            volcano_pod({"name": "ml/named-0", "group": "named", "req": GPU})]


async def _bind(http: Any, name: str) -> str:
    body = {"PodName": name, "PodNamespace": "ml", "PodUID": f"ml-{name}", "Node": "n0"}
    resp = await http.post("/extender/gang/bind", json=body)
    assert resp.status == 200, await resp.text()
    return str((await resp.json())["Error"])


async def test_a_plain_pods_binding_carries_the_podgroup_name_the_controller_gives_it(aiohttp_client):
    client = RecordingClient()
    extender = make_extender(_objects(), client, scheduler_names=NAMES)
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    for name in ("bare", "owned", "named-0"):
        assert await _bind(http, name) == ""
    notes = {key: body for verb, key, body in client.bodies if verb == "bind"}
    assert notes == {
        "ml/bare": {GROUP_NAME_ANNOTATION: "podgroup-ml-bare"},  # a bare pod's own UID
        "ml/owned": {GROUP_NAME_ANNOTATION: "podgroup-rs-uid"},  # its controller owner's
        "ml/named-0": {},  # it names one already
    }
    assert [c for c in client.calls if c[0] == "patch"] == [], "no write of its own"


async def test_a_plain_pod_counts_in_its_podgroup_before_its_annotation_lands():
    pg = podgroup({"name": "ml/podgroup-ml-bare", "min": 1, "phase": "Inqueue"})
    extender = make_extender([*_objects(), pg], scheduler_names=NAMES)
    assert extender.state.gang_members["ml/podgroup-ml-bare"] == {"ml/bare"}
    assert extender.state.snapshot.pods["ml/bare"].group == "podgroup-ml-bare"
    outcome = await extender.loop.run_once()
    assert outcome is not None and "ml/podgroup-ml-bare" in outcome.new_plans, "planned as its PodGroup's"
    # The verbs agree: filter answers the pod from its PodGroup's plan.
    assert extender._meta(volcano_pod({"name": "ml/bare", "req": GPU}))[2] == "ml/podgroup-ml-bare"
    # A PodGroup not made yet: the pod passes as a pod of none (its queue's checks), as before.
    alone = make_extender(_objects(), scheduler_names=NAMES)
    assert alone._meta(volcano_pod({"name": "ml/bare", "req": GPU}))[2] is None


async def test_a_gang_on_its_way_through_bind_gets_no_status_write_and_running_once_bound():
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}}) for i in range(2)]
    fresh = podgroup({"name": "ml/g", "min": 2})
    fresh["status"] = {}  # as the PodGroup controller or a user creates it
    docs += [queue({"name": "default"}), fresh,
             *(volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU}) for i in range(2))]
    client = RecordingClient()
    extender = make_extender(docs, client)
    await extender.loop.run_once()
    assert extender.plan.gangs, "the gang was planned"
    assert [c for c in client.calls if c[0] == "patch_status" and c[1][0] == "PodGroup"] == [], (
        "no Inqueue write for a gang whose pods are being bound")
    for i in range(2):
        feed(extender.state, volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU, "node": f"n{i}"}))
        extender.plan.forget_pod(f"ml/g-{i}")
    await extender.loop.run_once()
    writes = [body["status"] for verb, kind, body in client.bodies if verb == "patch_status" and kind == "PodGroup"]
    assert [w["phase"] for w in writes] == ["Running"]


async def test_a_plan_made_for_a_pod_bound_meanwhile_is_not_adopted_and_its_podgroup_reads_running():
    """The session's view can lag the service's (it keeps its own copy of the cluster in the session process): a
    plan for a pod whose bind the service has already heard is not adopted, or nothing would take the pod off it
    until the plan expired and its PodGroup would wait that long for Running (the flaky spark-driver e2e)."""
    docs = [node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
            queue({"name": "default"}), podgroup({"name": "ml/driver", "min": 1, "phase": "Inqueue"}),
            volcano_pod({"name": "ml/driver-0", "group": "driver", "req": GPU})]
    client = RecordingClient()
    extender = make_extender(docs, client)
    loop = extender.loop
    outcome = await loop.runner(extender.plan.placements(), loop.conf.refresh())
    assert outcome is not None and "ml/driver" in outcome.new_plans, "the session planned the pending driver"
    feed(extender.state, volcano_pod({"name": "ml/driver-0", "group": "driver", "req": GPU, "node": "n0"}))
    loop._adopt(outcome, 0.0)
    assert extender.plan.gangs == {}, "bound before its plan arrived: nothing to plan"
    await loop.run_once()
    writes = [body["status"] for verb, kind, body in client.bodies if verb == "patch_status" and kind == "PodGroup"]
    assert [w["phase"] for w in writes] == ["Running"]


async def test_which_events_ask_for_a_session():
    """A plain pod's arrival, its PodGroup of one appearing after it, and a PodGroup's status coming back from the
    session's own write ask for no session (filter passes such a pod without a plan; sessions still run every
    period); a gang member waiting for a node, a PodGroup's spec changing, a new gang and a pod going do."""
    pokes: list[int] = []
    state = ClusterState(client=None, on_change=lambda: pokes.append(1), scheduler_names=NAMES)  # type: ignore[arg-type]

    def asks(obj: dict[str, Any], event: str = "ADDED") -> bool:
        pokes.clear()
        reflector = next(r for r in state.reflectors if r.resource.kind == obj["kind"])
        reflector.store[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
        state.apply(event, obj)
        return bool(pokes)

    bare = volcano_pod({"name": "ml/bare", "req": GPU})
    assert not asks(bare), "a plain pod: its PodGroup does not exist yet"
    pg = podgroup({"name": "ml/podgroup-ml-bare", "min": 1, "phase": "Pending"})
    assert not asks(pg), "its PodGroup of one, after it"
    assert not asks({**pg, "status": {"phase": "Running"}}, "MODIFIED"), "status only"
    assert asks({**pg, "spec": {**pg["spec"], "queue": "other"}}, "MODIFIED"), "its spec"
    assert asks(podgroup({"name": "ml/g", "min": 2, "phase": "Pending"})), "a new gang"
    assert asks(volcano_pod({"name": "ml/g-0", "group": "g", "req": GPU})), "a gang member waiting for a node"
    assert not asks(volcano_pod({"name": "ml/g-0", "group": "g", "req": GPU, "node": "n0"}), "MODIFIED"), "bound"
    assert asks(bare, "DELETED"), "a pod gone: room"


async def test_a_gang_whose_pods_arrive_within_a_period_gets_one_condition_write_then_the_latest():
    """Sessions run on every change, up to five a second; a gang's Unschedulable message changes as each member
    arrives. The write each arrival would make is overwritten by the next: within the period only the first goes,
    and the latest goes out once the period is over (Volcano writes once per one-second session)."""
    docs = [node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}}),
            queue({"name": "default"}), podgroup({"name": "ml/g", "min": 3, "phase": "Inqueue"}),
            volcano_pod({"name": "ml/g-0", "group": "g", "req": GPU})]
    client = RecordingClient()
    extender = make_extender(docs, client)

    def conditions() -> list[str]:
        return [c["message"] for verb, kind, body in client.bodies if verb == "patch_status" and kind == "PodGroup"
                for c in body["status"]["conditions"] if c["type"] == "Unschedulable"]

    await extender.loop.run_once()
    for i in (1, 2):
        feed(extender.state, volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": GPU}))
        await extender.loop.run_once()
    first = conditions()
    assert len(first) == 1, first
    extender.loop.runner.pacer.period_s = 0.0  # type: ignore[attr-defined]  # the period is over
    await extender.loop.run_once()
    assert [m.split(":")[0] for m in conditions()] == [first[0].split(":")[0], "3/3 tasks in gang unschedulable"]
