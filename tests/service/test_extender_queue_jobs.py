"""`lapilli_queue_jobs{queue,phase}` follows the leader's sessions, with the phase each session's status write gives
(not the why pass: it is there with `--why-interval 0`), and a replica that stops leading exports none."""

from __future__ import annotations

from typing import Any

import pytest

from extender.service.loop import SessionLoop
from lapilli.meta import key_of
from tests.service.extender_state import cluster_state
from tests.service.test_extender_events import _gang, _gpu_nodes, _loop
from tests.unit.extender.engine.builders import podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _jobs(loop: SessionLoop) -> dict[tuple[str, str], float]:
    return {(s.labels["queue"], s.labels["phase"]): s.value
            for metric in loop.metrics.queue_jobs.gauge.collect() for s in metric.samples}


def _running(name: str) -> list[dict[str, Any]]:
    """Stored Inqueue, its 2 pods bound and running on n0 and n1: the session writes it Running."""
    docs = _gang(name, 2)
    for i, doc in enumerate(docs[1:]):
        doc["spec"]["nodeName"], doc["status"]["phase"] = f"n{i}", "Running"
    return docs


async def test_counts_follow_the_session_and_go_when_leadership_does() -> None:
    # 3 nodes of 1 GPU: `train` runs on n0 and n1, `wait` (2 pods) is admitted but only 1 GPU is free, and
    # `later` (no pods yet) is Pending: enqueue admits it only if its minResources fit what is left.
    later = podgroup({"name": "ml/later", "min": 1, "phase": "Pending",
                      "minResources": {"cpu": "1", "nvidia.com/gpu": "4"}})
    state = cluster_state([queue({"name": "default"}), *_gpu_nodes(3), *_running("train"), *_gang("wait", 2),
                           later])
    loop, client, _ = _loop(state)
    assert loop.term()
    await loop.run_once()
    assert ("patch_status", ("PodGroup", "ml", "train")) in client.calls
    # `train` counts as running (the phase the session writes), not as the stored Inqueue.
    assert _jobs(loop) == {("default", "running"): 1, ("default", "inqueue"): 1, ("default", "pending"): 1}

    # `wait` is deleted: its count goes to 0 rather than staying at its last value.
    for obj in _gang("wait", 2):
        next(r for r in state.reflectors if r.resource.kind == obj["kind"]).store.pop(key_of(obj))
        state.apply("DELETED", obj)
    await loop.run_once()
    assert _jobs(loop) == {("default", "running"): 1, ("default", "inqueue"): 0, ("default", "pending"): 1}

    loop.is_leader = lambda: False
    assert not loop.term()
    assert _jobs(loop) == {}


async def test_a_status_write_on_its_way_is_not_sent_again() -> None:
    """The sessions diff against their own watch, which trails the write (by seconds on a busy machine): a session
    before the write's echo sends nothing again, and counts the gang in the phase that write gives it."""
    state = cluster_state([queue({"name": "default"}), *_gpu_nodes(3), *_running("train")])
    loop, client, _ = _loop(state)
    assert loop.term()
    for _ in range(3):
        await loop.run_once()
    assert client.calls.count(("patch_status", ("PodGroup", "ml", "train"))) == 1
    assert _jobs(loop)[("default", "running")] == 1
