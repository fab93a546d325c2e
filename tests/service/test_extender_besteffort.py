"""BestEffort gangs at the extender (issue 13): the bind quorum is what the session committed, so members that
backfill placed bind even when a node limit kept the session from placing the whole gang (Volcano counts pending
BestEffort tasks as ready and binds what backfill places)."""

from __future__ import annotations

import asyncio

import pytest

from extender.service.http import make_app
from tests.service.extender_state import RecordingClient, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _objects() -> list[dict]:
    # Two nodes that take one pod each; a BestEffort gang of three, and a resourced gang of three.
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "pods": "1"}}) for i in range(2)]
    docs.append(queue({"name": "default"}))
    docs.append(podgroup({"name": "ml/be", "min": 3, "phase": "Inqueue"}))
    docs += [volcano_pod({"name": f"ml/be-w-{i}", "group": "be"}) for i in range(3)]
    return docs


@pytest.fixture
async def served(aiohttp_client):
    client = RecordingClient()
    extender = make_extender(_objects(), client)
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: extender.state.synced))
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
