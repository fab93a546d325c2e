"""The session process over a real pipe: outcomes come back whole, and the node index crosses only when the node
set changed (the verbs' process keeps the same dict object meanwhile)."""

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
        assert len(second.new_plans["ml/g"][1]) == 2  # the rest of the outcome is whole
        third = await runner({ADD_NODE: "yes"}, conf)
        assert third is not None
        assert set(third.node_index) == {"n0", "n1", "n2", "late1"}
        assert third.idle.shape[0] == 4
        fourth = await runner({}, conf)
        assert fourth is not None and fourth.node_index is third.node_index
    finally:
        runner.stop()
