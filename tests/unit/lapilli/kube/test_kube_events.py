"""The kernel's event recorder aggregates like client-go's: the same (object, type, reason, message) bumps one
Event's count; anything else, or a repeat whose Event is gone, creates a new one."""

from __future__ import annotations

from typing import Any

from controller.events import EventRecorder as ControllerRecorder
from lapilli.kube.errors import NotFound
from lapilli.kube.events import EventRecorder

PG = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
      "metadata": {"name": "g4", "namespace": "ml", "uid": "u1"}}


class EventSink:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []

    async def create(self, res: Any, obj: dict, namespace: str | None = None) -> dict:
        self.writes.append(("create", obj["metadata"]["name"]))
        self.events[obj["metadata"]["name"]] = dict(obj)
        return obj

    async def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict:
        self.writes.append(("patch", name))
        if name not in self.events:
            raise NotFound(404, "NotFound", f'events "{name}" not found')
        self.events[name].update(patch)
        return self.events[name]


async def test_a_repeat_bumps_the_same_event_and_another_message_makes_a_new_one():
    sink = EventSink()
    recorder = EventRecorder(sink, "volcano")  # type: ignore[arg-type]
    recorder.record(PG, "Warning", "Unschedulable", "4/4 tasks in gang unschedulable: x")
    await recorder.flush()
    recorder.record(PG, "Warning", "Unschedulable", "4/4 tasks in gang unschedulable: x")
    await recorder.flush()
    [name] = sink.events
    assert [w[0] for w in sink.writes] == ["create", "patch"]
    event = sink.events[name]
    assert event["count"] == 2 and event["source"] == {"component": "volcano"}
    assert event["involvedObject"]["kind"] == "PodGroup" and event["involvedObject"]["uid"] == "u1"
    recorder.record(PG, "Warning", "Unschedulable", "3/4 tasks in gang unschedulable: x")
    recorder.record(PG, "Normal", "Scheduled", "pod group is ready")
    await recorder.flush()
    assert len(sink.events) == 3
    assert recorder.written == 4


async def test_a_repeat_whose_event_is_gone_creates_a_fresh_one():
    sink = EventSink()
    recorder = EventRecorder(sink, "volcano")  # type: ignore[arg-type]
    recorder.record(PG, "Warning", "Unschedulable", "m")
    await recorder.flush()
    sink.events.clear()  # the API server's event TTL ran out
    recorder.record(PG, "Warning", "Unschedulable", "m")
    await recorder.flush()
    assert [w[0] for w in sink.writes] == ["create", "patch", "create"]
    [event] = sink.events.values()
    assert event["count"] == 1


async def test_the_controllers_report_as_themselves():
    sink = EventSink()
    recorder = ControllerRecorder(sink)  # type: ignore[arg-type]
    recorder.record(PG, "Normal", "CommandIssued", "m")
    await recorder.flush()
    [event] = sink.events.values()
    assert event["source"] == {"component": "lapilli-controller"}
