"""task-topology through the extender (issue 13): the session loop, run with examples/scheduler-conf-task-topology.yaml,
plans a ps/worker gang carrying Volcano's task-topology annotations onto as few nodes as fit, and kube-scheduler's
filter and bind verbs follow that plan. With Volcano's default conf the same gang is spread."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from extender.service.core import Extender
from extender.service.http import make_app
from tests.service.extender_state import RecordingClient, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONF = Path(__file__).resolve().parents[2] / "examples" / "scheduler-conf-task-topology.yaml"
NODES = ["n1", "n2", "n3"]
# 2 ps of 2 CPU and 4 workers of 3 CPU: 16 CPU, exactly one node's worth.
MEMBERS = {**{f"ml/tf-ps-{i}": ("ps", "2", "4Gi") for i in range(2)},
           **{f"ml/tf-worker-{i}": ("worker", "3", "8Gi") for i in range(4)}}


def _objects() -> list[dict]:
    docs = [node({"name": n, "alloc": {"cpu": "16", "memory": "64Gi"}}) for n in NODES]
    docs.append(queue({"name": "default"}))
    # What Volcano's job controller copies from a Job's annotations onto its PodGroup.
    docs.append(podgroup({"name": "ml/tf", "min": 6, "phase": "Inqueue",
                          "annotations": {"volcano.sh/task-topology-affinity": "ps,worker",
                                          "volcano.sh/task-topology-task-order": "ps,worker"}}))
    docs += [volcano_pod({"name": key, "group": "tf", "role": role, "req": {"cpu": cpu, "memory": memory}})
             for key, (role, cpu, memory) in MEMBERS.items()]
    return docs


async def _planned(conf: Path | None, client: RecordingClient | None = None) -> Extender:
    extender = make_extender(_objects(), client, conf=conf)
    await extender.loop.run_once()
    return extender


def _without_task_topology(tmp_path: Path) -> Path:
    conf = yaml.safe_load(CONF.read_text())
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "task-topology"]
    path = tmp_path / "binpack-only.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.mark.parametrize("which", ["default", "without task-topology"])
async def test_other_confs_spread_the_gang(tmp_path, which):
    # Binpack alone does not outweigh nodeorder's least-requested spreading: task-topology is what packs.
    extender = await _planned(None if which == "default" else _without_task_topology(tmp_path))
    assert len({extender.plan.node_for(key) for key in MEMBERS}) > 1


async def test_the_gang_is_planned_packed_and_filter_and_bind_follow_the_plan(aiohttp_client):
    client = RecordingClient()
    extender = await _planned(CONF, client)
    planned = {key: extender.plan.node_for(key) for key in MEMBERS}
    assert len(set(planned.values())) == 1 and None not in planned.values(), planned
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: extender.state.synced))

    docs = {f"{d['metadata']['namespace']}/{d['metadata']['name']}": d for d in _objects() if d["kind"] == "Pod"}
    for key, doc in docs.items():
        body = await (await http.post("/extender/filter",
                                      json={"Pod": doc, "Nodes": None, "NodeNames": NODES})).json()
        assert body["NodeNames"] == [planned[key]], (key, body)

    replies = await asyncio.wait_for(asyncio.gather(*(
        http.post("/extender/gang/bind", json={"PodName": key.split("/")[1], "PodNamespace": "ml",
                                               "PodUID": docs[key]["metadata"]["uid"], "Node": planned[key]})
        for key in MEMBERS
    )), timeout=1.5)  # under the permit timeout: released by the quorum, not by the timer
    assert [await r.json() for r in replies] == [{"Error": ""}] * len(MEMBERS)
    binds = {f"{c[1][0]}/{c[1][1]}": c[1][2] for c in client.calls if c[0] == "bind"}
    assert binds == planned
