"""Stand-ins for the extender's service tests: cluster state fed objects directly (no reflector runs) and a
recording stand-in for the one write client, since this tier checks the service's contract, not the API server
(that is tests/e2e)."""

from __future__ import annotations

from typing import Any

from extender.service.state import ClusterState
from lapilli.meta import key_of


class RecordingClient:
    """Stands in for lapilli.kube.KubeClient's write verbs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.bodies: list[tuple[str, str, Any]] = []  # (verb, kind, body) of every create and patch

    async def create(self, res: Any, obj: dict, namespace: str | None = None) -> dict:
        meta = obj.get("metadata") or {}
        self.calls.append(("create", (res.kind, namespace or meta.get("namespace"), meta.get("name"))))
        self.bodies.append(("create", res.kind, obj))
        return obj

    async def patch_status(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict:
        self.calls.append(("patch_status", (res.kind, namespace, name)))
        self.bodies.append(("patch_status", res.kind, patch))
        return {}

    async def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict:
        self.calls.append(("patch", (res.kind, namespace, name)))
        self.bodies.append(("patch", res.kind, patch))
        return {}

    async def evict(self, namespace: str, name: str) -> dict:
        self.calls.append(("evict", (namespace, name)))
        return {}

    async def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None) -> dict:
        self.calls.append(("bind", (namespace, name, node)))
        return {}


def cluster_state(objects: list[dict]) -> ClusterState:
    state = ClusterState(client=None)  # type: ignore[arg-type]  # reflectors are never started here
    for reflector in state.reflectors:
        reflector.synced.set()
    for obj in objects:
        feed(state, obj)
    return state


def feed(state: ClusterState, obj: dict) -> None:
    """What a reflector does with an added or modified object: keep it in its store, then hand the event on."""
    reflector = next(r for r in state.reflectors if r.resource.kind == obj["kind"])
    reflector.store[key_of(obj)] = obj
    state.apply("ADDED", obj)
