"""Which PodGroup a plain pod (no Volcano Job) belongs to, before and after it says so itself. Pure: the engine may
use it.

Mirrors Volcano's `helpers.GeneratePodgroupName` and the PodGroup controller's `addPod` filter (reference §3.8): a
live pod whose `schedulerName` is one of Volcano's and that names no PodGroup gets `podgroup-<controller owner
UID>` (one gang per ReplicaSet, StatefulSet, batch Job…) or `podgroup-<pod UID>` for a bare pod. Volcano's
controller writes that name into the pod's `scheduling.k8s.io/group-name` annotation with a patch of its own;
Lapilli writes it with the pod's Binding when its extender binds the pod first (the API server merges a Binding's
annotations into the pod with the node), so `group_of` is what every reader takes for the pod's group meanwhile.
A pod's UID is given after mutating admission, so a bare pod's name cannot be set by an admission webhook.
"""

from __future__ import annotations

from collections.abc import Collection

from lapilli.api.constants import GROUP_NAME_ANNOTATION
from lapilli.meta import Obj, annotations_of, is_deleting, meta, owner_references

__all__ = ["controller_owner", "group_of", "names_its_own", "podgroup_name_for", "wants_podgroup"]


def controller_owner(pod: Obj) -> Obj | None:
    return next((o for o in owner_references(pod) if o.get("controller")), None)


def _live_and_ours(pod: Obj, scheduler_names: Collection[str]) -> bool:
    if is_deleting(pod) or str((pod.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed"):
        return False
    return (pod.get("spec") or {}).get("schedulerName") in scheduler_names


def wants_podgroup(pod: Obj, scheduler_names: Collection[str]) -> bool:
    """A live pod for one of our schedulers that belongs to no PodGroup yet."""
    return not annotations_of(pod).get(GROUP_NAME_ANNOTATION) and _live_and_ours(pod, scheduler_names)


def names_its_own(pod: Obj, scheduler_names: Collection[str]) -> bool:
    """A live pod for one of our schedulers that names the PodGroup the controller gives it: its Binding may have
    named it before the controller made it (whether it exists is the caller's question)."""
    named = annotations_of(pod).get(GROUP_NAME_ANNOTATION)
    return bool(named) and named == podgroup_name_for(pod) and _live_and_ours(pod, scheduler_names)


def podgroup_name_for(pod: Obj) -> str:
    owner = controller_owner(pod)
    return f"podgroup-{owner.get('uid') if owner else meta(pod).get('uid')}"


def group_of(pod: Obj, scheduler_names: Collection[str]) -> str:
    """The name of the pod's PodGroup: its annotation, else, for a pod of one of our schedulers, the name the
    PodGroup controller gives (or gave) it, finished or being deleted alike; "" for a pod of no PodGroup."""
    named = annotations_of(pod).get(GROUP_NAME_ANNOTATION)
    if named:
        return str(named)
    return podgroup_name_for(pod) if (pod.get("spec") or {}).get("schedulerName") in scheduler_names else ""
