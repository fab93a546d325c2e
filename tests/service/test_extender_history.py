"""The leader's history for the dashboard (extender/service/history.py): each queue's GPUs from the last session, the
starts the session loop reports, written to one ConfigMap, read back by the next leader and carried on."""

from __future__ import annotations

from typing import Any

import pytest

from extender.service.history import HistoryLoop
from lapilli.history import History
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import Resource
from tests.service.extender_state import cluster_state
from tests.service.test_extender_events import _gang, _gpu_nodes, _loop
from tests.unit.extender.engine.builders import queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


class ConfigMaps:
    """The API server's ConfigMaps, as far as the history needs them."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append("get")
        if name not in self.stored:
            raise NotFound(404, "NotFound", name)
        return self.stored[name]

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append("patch")
        if name not in self.stored:
            raise NotFound(404, "NotFound", name)
        self.stored[name]["data"].update(patch["data"])
        return self.stored[name]

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.calls.append("create")
        self.stored[obj["metadata"]["name"]] = obj
        return obj


def _read(cms: ConfigMaps) -> History:
    return History.from_json(cms.stored["lapilli-history"]["data"]["history.json"])


async def test_samples_are_written_and_a_new_leader_carries_on() -> None:
    state = cluster_state([queue({"name": "default"}), *_gpu_nodes(2), *_gang("wait", 1)])
    sessions, _, _ = _loop(state)
    cms, clock = ConfigMaps(), [1000.0]
    first = HistoryLoop(lambda: sessions.latest, cms, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert not await first.run_once(), "no session yet: nothing to sample"
    await sessions.run_once()
    first.started("ml/wait", "default", 900.0, 1000.0)
    assert await first.run_once()
    assert cms.calls == ["get", "patch", "create"]
    written = _read(cms)
    assert written.times == [1000.0] and written.queues["default"].allocated == [1.0]
    assert [(s.key, s.waited_s) for s in written.started] == [("ml/wait", 100.0)]

    clock[0] += 300
    second = HistoryLoop(lambda: sessions.latest, cms, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert await second.run_once()
    assert _read(cms).times == [1000.0, 1300.0] and len(_read(cms).started) == 1, "read back, then carried on"
