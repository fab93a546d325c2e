"""The why-condition on PodGroups (extender/service/why.py) and the time-to-Running dedupe, over plain snapshots."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from extender.engine.explain import Explanation, Kind, Reason
from extender.engine.run import parse_scheduler_conf
from extender.engine.snapshot import Snapshot, build_snapshot
from extender.service.metrics import TimeToRunning
from extender.service.why import CONDITION, WhyLoop, condition, with_condition
from lapilli.kube.client import ObjectList
from lapilli.kube.errors import ApiError
from tests.unit.extender.engine.builders import documents

VOLCANO = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "0/4 tasks",
           "lastTransitionTime": "2026-01-01T00:00:00Z"}


def _waiting() -> Explanation:
    return Explanation("ns/pg", "lab-a", "Pending", 4, 0, 0, [
        Reason(Kind.QUEUE_CLOSED, "queue lab-a is Closed"), Reason(Kind.OVER_CAPABILITY, "needs gpu 4")])


def test_condition_says_waiting_with_the_reasons_in_order() -> None:
    cond = condition(_waiting())
    assert cond == {"type": CONDITION, "status": "True", "reason": "QueueClosed",
                    "message": "1. queue lab-a is Closed; 2. needs gpu 4"}
    running = Explanation("ns/pg", "lab-a", "Running", 4, 4, 4, [Reason(Kind.RUNNING, "running: 4 of 4")])
    assert condition(running)["status"] == "False"


def test_volcano_conditions_are_kept_and_unchanged_text_is_not_rewritten() -> None:
    first = with_condition([VOLCANO], condition(_waiting()), "2026-01-01T00:01:00Z")
    assert first is not None
    assert first[0]["type"] == CONDITION and first[0]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert first[1] == VOLCANO
    assert with_condition(first, condition(_waiting()), "2026-01-01T00:02:00Z") is None
    changed = _waiting()
    changed.reasons.pop(0)
    second = with_condition(first, condition(changed), "2026-01-01T00:03:00Z")
    assert second is not None and second[0]["reason"] == "OverCapability"
    # Still waiting: the transition time is the one of the first True.
    assert second[0]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert [c["type"] for c in second] == [CONDITION, "Unschedulable"]


def test_numbers_alone_do_not_rewrite_the_condition_but_a_new_reason_kind_does() -> None:
    first = with_condition([VOLCANO], condition(_waiting()), "2026-01-01T00:01:00Z")
    assert first is not None
    moved = _waiting()
    moved.reasons[1] = Reason(Kind.OVER_CAPABILITY, "needs gpu 6")  # same kinds, another number
    assert with_condition(first, condition(moved), "2026-01-01T00:02:00Z", kinds_changed=False) is None
    # Not known what the last write's kinds were (a new leader): the message decides.
    assert with_condition(first, condition(moved), "2026-01-01T00:02:00Z") is not None
    other = _waiting()
    other.reasons[1] = Reason(Kind.PLACEMENT, "0 of 4 pods placeable")
    rewritten = with_condition(first, condition(other), "2026-01-01T00:02:00Z", kinds_changed=True)
    assert rewritten is not None and "0 of 4 pods placeable" in rewritten[0]["message"]


def _loop(**kwargs: Any) -> WhyLoop:
    return WhyLoop(lambda: None, lambda: parse_scheduler_conf(None), lambda: {}, None,  # type: ignore[arg-type]
                   **kwargs)


def test_the_cap_takes_waiting_podgroups_in_turn() -> None:
    loop = _loop(limit=2)
    snap = _snap({f"u/{c}": "Pending" for c in "abcde"})
    passes = [loop.candidates(snap) for _ in range(4)]
    assert passes == [["u/a", "u/b"], ["u/c", "u/d"], ["u/a", "u/e"], ["u/b", "u/c"]]


class _Events:
    def __init__(self, error: ApiError | None) -> None:
        self.error = error

    async def list(self, res: Any, namespace: str | None = None, **_: Any) -> ObjectList:
        if self.error is not None:
            raise self.error
        return ObjectList([{"kind": "Event", "involvedObject": {"kind": "Queue", "name": "lab-a"},
                            "reason": "CloseQueue", "lastTimestamp": "2026-01-01T00:00:05Z"}], "1")


async def test_the_why_pass_names_who_closed_the_queue() -> None:
    closed = {"metadata": {"name": "lab-a", "managedFields": [
        {"manager": "alice-script", "time": "2026-01-01T00:00:04Z", "fieldsV1": {"f:status": {"f:state": {}}}}]},
        "status": {"state": "Closed"}}
    loop = _loop(queues=lambda: {"lab-a": closed, "lab-b": {"metadata": {"name": "lab-b"}, "status": {"state": "Open"}}})
    loop.client = _Events(None)  # type: ignore[assignment]
    assert await loop.closed_by() == {"lab-a": "by a CloseQueue Command at 2026-01-01T00:00:05Z"}
    loop.client = _Events(ApiError(403, "Forbidden", "events"))  # type: ignore[assignment]
    assert await loop.closed_by() == {"lab-a": "by alice-script at 2026-01-01T00:00:04Z"}


def _snap(phases: dict[str, str]) -> Snapshot:
    docs = documents({
        "queues": [{"name": "lab-a"}],
        "podgroups": [{"name": key, "queue": "lab-a", "min": 1, "phase": phase} for key, phase in phases.items()],
    })
    for doc in docs:
        doc["metadata"]["creationTimestamp"] = "1970-01-01T00:00:40Z"
    return build_snapshot(docs)


# The time to Running is observed at the session's status write (tests/service/test_extender_time_to_running.py),
# not sampled here: a gang that ran between two why passes used to be missed.
def test_counted_once_per_podgroup_and_forgotten_when_gone() -> None:
    registry = CollectorRegistry()
    metric = TimeToRunning(registry)
    metric.observe("ml/a", "uid-1", "q", 10.0, 40.0)
    metric.observe("ml/a", "uid-1", "q", 10.0, 50.0)
    metric.retain(["ml/b"])
    metric.observe("ml/a", "uid-2", "q", 45.0, 50.0)  # deleted and made again: a new job
    assert registry.get_sample_value("lapilli_podgroup_time_to_running_seconds_count", {"queue": "q"}) == 2
    assert registry.get_sample_value("lapilli_podgroup_time_to_running_seconds_sum", {"queue": "q"}) == 35.0
