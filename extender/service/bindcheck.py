"""Whether a bind the extender is asked for may be performed: the bind verb's authorisation.

The verb is an HTTP endpoint, and whatever reaches it could otherwise place any unscheduled pod on any node with
the service's RBAC, around every predicate, taint and quota. So, whatever the network topology, a bind is
performed only for a pod that exists with the UID given, is not bound, not finished and not being deleted, and
has a `schedulerName` this Lapilli serves, onto a node that exists, is Ready and schedulable, matches the pod's
node selector and required affinity, carries no NoSchedule/NoExecute taint the pod does not tolerate, and has
room for it in the current cluster state. For a gang member "room" is the session's: the node its gang's plan
admits, or one where the pod fits the room the latest session left (what filter's re-plan accepts).

Everything here reads the cluster cache (the reflectors' stores and the snapshot): a refused bind never reaches
the API server. The one exception is a pod kube-scheduler knows and the cache does not show yet (watch lag),
which is looked up with one GET after its names were checked, so no request path can be built from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from extender.engine.snapshot import NodeRecord
from extender.service.state import ClusterState
from lapilli.meta import section
from lapilli.nodematch import PodPlacement
from lapilli.resources.units import pod_request
from lapilli.resources.vector import TOLERANCE

_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE: Final = re.compile(f"^{_LABEL}$")
_SUBDOMAIN: Final = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_FINISHED: Final = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a bind is not performed: `reason` is the metric label, `message` the answer kube-scheduler logs."""

    reason: str
    message: str


def names_refusal(namespace: str, name: str, uid: str, node: str) -> Refusal | None:
    """The names a bind carries, as Kubernetes validates them (they end up in the cache keys and in at most one
    request path); an empty UID is refused, since it is what proves which pod kube-scheduler scheduled."""
    if not _NAMESPACE.match(namespace) or len(namespace) > 63:
        return Refusal("invalid", f"PodNamespace {namespace[:80]!r} is not a namespace name")
    for what, value in (("PodName", name), ("Node", node)):
        if not _SUBDOMAIN.match(value) or len(value) > 253:
            return Refusal("invalid", f"{what} {value[:80]!r} is not a Kubernetes object name")
    if not uid.strip():
        return Refusal("invalid", f"pod {namespace}/{name}: PodUID is empty")
    return None


def pod_refusal(pod: Mapping[str, Any], key: str, uid: str, scheduler_names: Iterable[str]) -> Refusal | None:
    """The pod's side: the UID kube-scheduler saw, still schedulable, ours to schedule. (Whether it is bound
    already is the caller's: a repeat of a bind that landed is answered with success.)"""
    meta, spec = section(pod, "metadata"), section(pod, "spec")
    if meta.get("uid") != uid:
        return Refusal("uid-mismatch", f"pod {key} has uid {meta.get('uid')}, not {uid} (recreated?)")
    if meta.get("deletionTimestamp"):
        return Refusal("pod-deleting", f"pod {key} is being deleted")
    if (pod.get("status") or {}).get("phase") in _FINISHED:
        return Refusal("pod-finished", f"pod {key} has finished")
    scheduler = spec.get("schedulerName") or "default-scheduler"
    if scheduler not in scheduler_names:
        return Refusal("scheduler-name", f"pod {key} is for scheduler {scheduler!r}, which Lapilli does not serve")
    return None


def node_refusal(node: NodeRecord | None, name: str, spec: Mapping[str, Any], key: str) -> Refusal | None:
    """The node's side, as kube-scheduler's own filters would see it: it exists, is Ready, is schedulable (or
    the pod tolerates that), matches the pod's node selector and required affinity, and its NoSchedule and
    NoExecute taints are tolerated."""
    if node is None:
        return Refusal("node-not-found", f"node {name} does not exist")
    if not node.ready:
        return Refusal("node-not-ready", f"node {name} is not Ready")
    placement = PodPlacement.of(spec)
    if node.unschedulable and not placement.tolerates_unschedulable():
        return Refusal("node-unschedulable", f"node {name} is cordoned (unschedulable)")
    if not placement.matches_node(node.labels, node.name):
        return Refusal("node-affinity", f"node {name} does not match pod {key}'s node selector/affinity")
    untolerated = placement.untolerated(node.taints)
    if untolerated:
        taint = untolerated[0]
        return Refusal("node-taint", f"pod {key} does not tolerate node {name}'s taint "
                                     f"{taint.key}={taint.value}:{taint.effect}")
    return None


def room_refusal(
    state: ClusterState, node: NodeRecord, spec: Mapping[str, Any], key: str, pending: Iterable[str],
) -> Refusal | None:
    """Room on `node` now: its allocatable less the requests of the pods the cache shows on it (not finished)
    and of the pods `pending` (keys of binds to it that the cache does not show yet: parked or in flight)."""
    request = pod_request(spec)
    used: dict[str, float] = {}
    snap = state.snapshot
    for other_key in {*state.pods_on(node.name), *pending} - {key}:
        other = snap.pods.get(other_key)
        if other is None or other.phase in _FINISHED:
            continue
        for resource, amount in other.request.items():
            used[resource] = used.get(resource, 0.0) + amount
    for resource, amount in request.items():
        if amount <= 0:
            continue
        free = node.allocatable.get(resource, 0.0) - used.get(resource, 0.0)
        if amount > free + TOLERANCE:
            return Refusal("no-room", f"node {node.name} has no room for pod {key}: {resource} "
                                      f"{_show(free)} free, {_show(amount)} requested")
    return None


def _show(units: float) -> str:
    return f"{max(units, 0.0):g}"
