"""The session process over a real pipe: outcomes come back whole; the node index and the nodes' room cross only when
they changed (the verbs' process keeps the same objects meanwhile), and the plan only when it changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender.service.loop import ConfSource
from extender.service.runner import ProcessRunner, serve_sessions
from tests.service.extender_state import cluster_state, feed
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADD_NODE = "test/add-a-node"  # a placement key the test child reads as "a node joins before this session"


def _gpu_node(name: str) -> dict:
    return node({"name": name, "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}})


class _Joining:
    """The child's end of the pipe; a request carrying ADD_NODE adds a node to the child's cluster first."""

    def __init__(self, conn: Any, state: Any) -> None:
        self.conn, self.state, self.added = conn, state, 0

    def recv(self) -> Any:
        placements, *rest = self.conn.recv()
        if placements.pop(ADD_NODE, None):
            self.added += 1
            feed(self.state, _gpu_node(f"late{self.added}"))
        return (placements, *rest)

    def send(self, obj: Any) -> None:
        self.conn.send(obj)


def _child(_kubeconfig: str | None, _device_configs: list[str], _names: list[str], conn: Any) -> None:
    docs = [_gpu_node(f"n{i}") for i in range(3)] + [queue({"name": "default"})]
    docs.append(podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"}))
    docs += [pod({"name": f"ml/g-{i}", "group": "g", "req": {"cpu": "1", "nvidia.com/gpu": "1"}}) for i in range(2)]
    state = cluster_state(docs)
    asyncio.run(serve_sessions(state, _Joining(conn, state)))  # type: ignore[arg-type]


async def test_the_node_index_crosses_the_pipe_only_when_nodes_change():
    runner = ProcessRunner(None, target=_child)
    runner.start()
    try:
        conf = ConfSource(None).conf
        first = await runner({}, conf)
        second = await runner({}, conf)
        assert first is not None and second is not None
        assert set(first.node_index) == {"n0", "n1", "n2"}
        assert second.node_index is first.node_index  # unchanged: not sent again, the same dict reused
        assert second.allocatable is first.allocatable and second.idle is first.idle  # so is the nodes' room
        assert len(second.new_plans["ml/g"][1]) == 2  # the rest of the outcome is whole
        third = await runner({ADD_NODE: "yes"}, conf)
        assert third is not None
        assert set(third.node_index) == {"n0", "n1", "n2", "late1"}
        assert third.idle.shape[0] == 4 and third.allocatable.shape[0] == 4
        fourth = await runner({}, conf)
        assert fourth is not None and fourth.node_index is third.node_index
    finally:
        runner.stop()


class _Sent:
    """The parent's end of the pipe, keeping every request it sends."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.requests = conn, []

    def send(self, obj: Any) -> None:
        self.requests.append(obj)
        self.conn.send(obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


async def test_the_plan_crosses_the_pipe_only_when_it_changes():
    runner = ProcessRunner(None, target=_child)
    runner.start()
    sent = _Sent(runner._conn)
    runner._conn = sent  # type: ignore[assignment]
    try:
        conf = ConfSource(None).conf
        placements = {"ml/g-0": "n0", "ml/g-1": "n1"}  # the gang is planned: sessions assume it placed
        for _ in range(2):
            outcome = await runner(placements, conf)
            assert outcome is not None and "ml/g" not in outcome.new_plans
        assert [r.same_plan for r in sent.requests] == [False, True]
        assert sent.requests[1].placements == {}  # left out: the child kept the one it was sent
        outcome = await runner({}, conf)  # a new plan (the gang's was dropped): sent, and the gang planned again
        assert outcome is not None and len(outcome.new_plans["ml/g"][1]) == 2
        assert sent.requests[2].same_plan is False
    finally:
        runner.stop()
