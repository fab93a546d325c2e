"""BestEffort gangs at the extender (issue 13): the bind quorum is what the session committed, so members that
backfill placed bind even when a node limit kept the session from placing the whole gang (Volcano counts pending
BestEffort tasks as ready and binds what backfill places)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from extender.service.core import Extender
from extender.service.http import make_app
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.permit import PermitCache
from extender.service.plan import Plan
from tests.service.extender_state import RecordingClient, cluster_state
from tests.unit.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _objects() -> list[dict]:
    # Two nodes that take one pod each; a BestEffort gang of three, and a resourced gang of three.
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "pods": "1"}}) for i in range(2)]
    docs.append(queue({"name": "default"}))
    docs.append(podgroup({"name": "ml/be", "min": 3, "phase": "Inqueue"}))
    docs += [pod({"name": f"ml/be-w-{i}", "group": "be"}) for i in range(3)]
    return docs


@pytest.fixture
async def served(aiohttp_client):
    client = RecordingClient()
    state = cluster_state(_objects())
    plan = Plan(ttl_s=60)
    permit: PermitCache
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: permit.parked_count(), restarts=state.restarts)
    loop = SessionLoop(state, plan, client, ConfSource(None), metrics)  # type: ignore[arg-type]
    extender = Extender(state, plan, loop, None, client, metrics)  # type: ignore[arg-type]
    permit = PermitCache(extender.bind_now, timeout_s=2)
    extender.permit = permit
    await loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: state.synced))
    return http, extender, client


async def test_the_best_effort_members_backfill_placed_bind_together_without_the_third(served):
    http, extender, client = served
    planned = {p: extender.plan.node_for(p) for p in (f"ml/be-w-{i}" for i in range(3))}
    placed = {p: n for p, n in planned.items() if n is not None}
    assert sorted(placed.values()) == ["n0", "n1"]  # one pod per node: the third has no room
    assert extender.plan.gangs["ml/be"].min_member == 2

    replies = await asyncio.wait_for(asyncio.gather(*(
        http.post("/extender/gang/bind", json={"PodName": key.split("/")[1], "PodNamespace": "ml",
                                               "PodUID": key.replace("/", "-"), "Node": n})
        for key, n in placed.items()
    )), timeout=1.5)  # under the permit timeout: released by the quorum, not by the timer
    assert [await r.json() for r in replies] == [{"Error": ""}, {"Error": ""}]
    assert sorted(c[1][1] for c in client.calls if c[0] == "bind") == sorted(k.split("/")[1] for k in placed)
