"""Stand-ins for the extender's service tests: cluster state fed objects directly (no reflector runs) and a
recording stand-in for the one write client, since this tier checks the service's contract, not the API server
(that is tests/e2e)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from extender.engine.rowmath import MatrixRows
from extender.service import pick
from extender.service.core import Extender
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.permit import PermitCache
from extender.service.plan import Plan
from extender.service.state import ClusterState
from lapilli.meta import key_of
from lapilli.resources.vector import TOLERANCE
from tests.unit.extender.engine.builders import pod


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

    async def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
                   annotations: dict[str, str] | None = None) -> dict:
        self.calls.append(("bind", (namespace, name, node)))
        self.bodies.append(("bind", f"{namespace}/{name}", dict(annotations or {})))
        return {}


class BindFails(RecordingClient):
    """A write client whose Binding POST fails, with each of `errors` in turn (the API server's refusal, a dropped
    connection, a timeout, a failed credential plugin); the attempt is still recorded."""

    def __init__(self, *errors: BaseException) -> None:
        super().__init__()
        self._errors = itertools.cycle(errors)

    async def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
                   annotations: dict[str, str] | None = None) -> dict:
        await super().bind(namespace, name, node, uid=uid, annotations=annotations)
        raise next(self._errors)


def cluster_state(objects: list[dict], scheduler_names: tuple[str, ...] = ()) -> ClusterState:
    """A synced state fed `objects`; pods of `scheduler_names` that name no PodGroup count in their own."""
    state = ClusterState(client=None, scheduler_names=scheduler_names)  # type: ignore[arg-type]  # never started
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


def make_extender(objects: list[dict], client: Any = None, conf: Path | None = None, **kwargs: Any) -> Extender:
    """An `Extender` over `objects` with its permit cache, writing through `client` (a `RecordingClient` by
    default), its sessions run with the scheduler conf file `conf` (Volcano's default without); its session loop
    has not run yet (`await extender.loop.run_once()` plans)."""
    client = client if client is not None else RecordingClient()
    state = cluster_state(objects, tuple(kwargs.get("scheduler_names", ())))
    plan = Plan(ttl_s=60)
    permit: PermitCache
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: permit.parked_count(), restarts=state.restarts)
    loop = SessionLoop(state, plan, client, ConfSource(conf), metrics)
    extender = Extender(state, plan, loop, None, client, metrics, **kwargs)  # type: ignore[arg-type]
    permit = PermitCache(extender.bind_now, timeout_s=2)
    extender.permit = permit
    return extender


def volcano_pod(spec: dict[str, Any]) -> dict[str, Any]:
    """The engine tests' pod builder, for Volcano's scheduler (the extender binds only pods of one it serves)."""
    doc = pod(spec)
    doc["spec"]["schedulerName"] = "volcano"
    return doc


def fresh_pick(extender: Extender, request: Any, offered: list[str], order: pick.NodeOrder | None = None) -> str | None:
    """The pick computed afresh over the room the verbs see now: the order's formulas over the offered rows the
    request fits, the highest score, ties to the lowest row (what filter's pick computed on every call before it
    kept its tables: the tests' reference and bench/pick.py's baseline). `order`: the conf's, read afresh unless
    given."""
    latest = extender.loop.latest
    assert latest is not None
    names = [n for n in offered if n in latest.node_index]
    rows = np.array([latest.node_index[n] for n in names], dtype=np.intp)
    room = extender._room(latest)[rows]
    fit = np.all(request < room + TOLERANCE, axis=1)
    if not fit.any():
        return None
    alloc = latest.allocatable[rows]
    order = order if order is not None else pick.NodeOrder.of(extender.loop.conf.conf)
    scores = np.broadcast_to(order.scores(request, latest.dims.index, MatrixRows(alloc, alloc - room)), len(rows))
    scores = np.where(fit, scores, -np.inf)
    top = rows[scores == scores.max()]
    return names[int(np.flatnonzero(rows == top.min())[0])]
