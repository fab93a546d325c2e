"""`lapilli_podgroup_time_to_running_seconds` is observed where the leader's session writes a PodGroup's phase
Running, whatever the why pass does: a gang that runs within one why interval counts, and so it does with
`--why-interval 0`. Observed once per PodGroup."""

from __future__ import annotations

from typing import Any

import pytest

from extender.service.loop import SessionLoop
from tests.service.extender_state import cluster_state, feed
from tests.service.test_extender_events import _gang, _gpu_nodes, _loop
from tests.unit.extender.engine.builders import queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CREATED = 1_000_000.0  # 1970-01-12T13:46:40Z
NOW = CREATED + 42.0


def _bound_gang(name: str, phase: str) -> list[dict[str, Any]]:
    """A PodGroup stored in `phase` whose pods kube-scheduler has bound and the kubelet runs."""
    docs = _gang(name, 2)
    for i, doc in enumerate(docs):
        doc["metadata"]["creationTimestamp"] = "1970-01-12T13:46:40Z"
        if doc["kind"] == "Pod":
            doc["spec"]["nodeName"] = f"n{i - 1}"
            doc["status"]["phase"] = "Running"
        else:
            doc["status"]["phase"] = phase
    return docs


def _observed(loop: SessionLoop) -> tuple[float | None, float | None]:
    samples = {s.name: s.value for metric in loop.metrics.time_to_running.histogram.collect() for s in metric.samples
               if s.labels.get("queue") == "default" and not s.name.endswith("_bucket")}
    return samples.get("lapilli_podgroup_time_to_running_seconds_count"), \
        samples.get("lapilli_podgroup_time_to_running_seconds_sum")


async def test_running_is_observed_at_the_status_write_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("extender.service.loop.time.time", lambda: NOW)
    state = cluster_state([queue({"name": "default"}), *_gpu_nodes(2), *_bound_gang("train", "Inqueue")])
    loop, client, _ = _loop(state)
    await loop.run_once()
    assert ("patch_status", ("PodGroup", "ml", "train")) in client.calls
    assert _observed(loop) == (1, 42.0)
    # The watch has not shown the write yet: the next session does not send it again (`Pacer.in_flight`), nor is
    # it counted twice.
    client.calls.clear()
    await loop.run_once()
    assert ("patch_status", ("PodGroup", "ml", "train")) not in client.calls
    assert _observed(loop) == (1, 42.0)


async def test_a_podgroup_already_running_is_not_observed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new leader finds it Running (its predecessor observed it): a status write for its counts is no start."""
    monkeypatch.setattr("extender.service.loop.time.time", lambda: NOW)
    docs = _bound_gang("served", "Running")
    state = cluster_state([queue({"name": "default"}), *_gpu_nodes(2), *docs])
    feed(state, {**docs[0], "status": {"phase": "Running", "running": 0}})  # counts out of date: a write follows
    loop, client, _ = _loop(state)
    await loop.run_once()
    assert ("patch_status", ("PodGroup", "ml", "served")) in client.calls
    assert _observed(loop) == (None, None)

