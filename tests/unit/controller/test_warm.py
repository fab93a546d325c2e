"""The controllers' warm caches: a term attaching is handed everything stored, then each event as it comes; a term
that ended hears nothing more, and the next term is handed the caches as they are then (no relist)."""

from __future__ import annotations

from typing import Any

from controller.warm import KINDS, WarmCaches
from lapilli.cluster import Event
from lapilli.kube.resources import PODS, QUEUES


def obj(kind: str, name: str, version: str = "1") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


class Term:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, bool]] = []

    def handlers(self) -> dict[Any, Any]:
        return {res: (lambda e, kind=res.kind: self.seen.append((kind, e.type, e.obj["metadata"]["name"],
                                                                  e.synthetic))) for res in KINDS}


def watch_event(caches: WarmCaches, res: Any, event: Event) -> None:
    """What the reflector does with a watch event: store it, then call its handler."""
    reflector = next(r for r in caches.reflectors if r.resource is res)
    reflector.store[f"ns/{event.obj['metadata']['name']}"] = event.obj
    reflector.handlers[0](event)


def test_a_term_is_handed_what_is_stored_then_each_event_and_the_next_term_starts_from_the_caches() -> None:
    caches = WarmCaches(client=None)  # type: ignore[arg-type]  # no reflector runs: the stores are fed here
    watch_event(caches, QUEUES, Event("ADDED", obj("Queue", "q1")))  # while standing by: stored, nobody told
    watch_event(caches, PODS, Event("ADDED", obj("Pod", "p1")))
    first = Term()
    caches.attach(first.handlers())
    assert first.seen == [("Queue", "ADDED", "q1", True), ("Pod", "ADDED", "p1", True)]
    watch_event(caches, PODS, Event("ADDED", obj("Pod", "p2")))
    assert first.seen[-1] == ("Pod", "ADDED", "p2", False)
    caches.detach()
    watch_event(caches, PODS, Event("MODIFIED", obj("Pod", "p2", "2")))
    assert first.seen[-1] == ("Pod", "ADDED", "p2", False), "a term that ended hears nothing more"
    second = Term()
    caches.attach(second.handlers())
    assert sorted(second.seen) == [("Pod", "ADDED", "p1", True), ("Pod", "ADDED", "p2", True),
                                   ("Queue", "ADDED", "q1", True)]
