"""The PodGroup of a plain pod (no Volcano Job), as pure functions (reference §3.8).

Mirrors `pkg/controllers/podgroup/pg_controller_handler.go`: a pod whose `schedulerName` is one of Volcano's and
that names no PodGroup gets `podgroup-<controller owner UID>` (one gang per ReplicaSet, StatefulSet, Job…) or
`podgroup-<pod UID>` for a bare pod; the PodGroup is owned like the pod (by the pod itself when it has no
owner), `minMember` comes from the owner's `scheduling.volcano.sh/group-min-member` (default 1), `minResources`
is `minMember` times the pod's quota usage, the queue from the pod's `scheduling.volcano.sh/queue-name`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from controller.quota import pod_quota_usage, scaled, scheduler_view, to_resource_list
from lapilli.api.constants import (
    COOLDOWN_TIME_KEY,
    GROUP_MIN_MEMBER_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    PODGROUP_KIND,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    REVOCABLE_ZONE_KEY,
    SCHEDULING_API_VERSION,
)
from lapilli.meta import Obj, annotations_of, is_deleting, meta, owner_references

_FROM_POD: Final = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY, REVOCABLE_ZONE_KEY, JDB_MIN_AVAILABLE_KEY,
                    JDB_MAX_UNAVAILABLE_KEY)
_PLURALS: Final = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "Deployment": "deployments",
                   "DaemonSet": "daemonsets", "Job": "jobs", "ReplicationController": "replicationcontrollers"}


def controller_owner(pod: Obj) -> Obj | None:
    return next((o for o in owner_references(pod) if o.get("controller")), None)


def wants_podgroup(pod: Obj, scheduler_names: Collection[str]) -> bool:
    """A live pod for one of our schedulers that belongs to no PodGroup yet."""
    if is_deleting(pod) or annotations_of(pod).get(GROUP_NAME_ANNOTATION):
        return False
    if str((pod.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed"):
        return False
    return (pod.get("spec") or {}).get("schedulerName") in scheduler_names


def podgroup_name_for(pod: Obj) -> str:
    owner = controller_owner(pod)
    return f"podgroup-{owner.get('uid') if owner else meta(pod).get('uid')}"


def owner_plural(kind: str) -> str:
    return _PLURALS.get(kind, kind.lower() + "s")


def min_member(owner_annotations: Mapping[str, str]) -> int:
    """`scheduling.volcano.sh/group-min-member` of the owner; 1 when absent, unparsable or below 1."""
    raw = str(owner_annotations.get(GROUP_MIN_MEMBER_ANNOTATION, "")).strip()
    try:
        value = int(raw)
    except ValueError:
        return 1
    return value if value >= 1 else 1


def _owner_references(pod: Obj) -> list[dict[str, Any]]:
    owners = [dict(o) for o in owner_references(pod) if o.get("controller")]
    if owners:
        return owners
    m = meta(pod)
    return [{"apiVersion": "v1", "kind": "Pod", "name": m.get("name"), "uid": m.get("uid"), "controller": True}]


def build_podgroup(pod: Obj, owner_annotations: Mapping[str, str], *, inherit: bool) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    members = min_member(owner_annotations)
    annotations = {k: v for k, v in owner_annotations.items() if inherit and k.startswith("volcano.sh/")}
    pod_notes = annotations_of(pod)
    annotations.update({k: pod_notes[k] for k in _FROM_POD if k in pod_notes})
    pg_meta: dict[str, Any] = {"name": podgroup_name_for(pod), "namespace": meta(pod).get("namespace"),
                               "ownerReferences": _owner_references(pod)}
    if annotations:
        pg_meta["annotations"] = annotations
    pg_spec: dict[str, Any] = {
        "minMember": members, "minResources": to_resource_list(scaled(scheduler_view(pod_quota_usage(spec)), members)),
    }
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    if pod_notes.get(QUEUE_NAME_ANNOTATION):
        pg_spec["queue"] = pod_notes[QUEUE_NAME_ANNOTATION]
    return {"apiVersion": SCHEDULING_API_VERSION, "kind": PODGROUP_KIND, "metadata": pg_meta, "spec": pg_spec}
