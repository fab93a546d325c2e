"""The PodGroup of a plain pod (no Volcano Job), as pure functions (reference §3.8).

Mirrors `pkg/controllers/podgroup/pg_controller_handler.go`: which pods get one and its name are the kernel's
(`lapilli.plainpods`: `podgroup-<controller owner UID>` or `podgroup-<pod UID>`); the PodGroup is owned like the
pod (by the pod itself when it has no owner), `minMember` comes from the owner's
`scheduling.volcano.sh/group-min-member` (default 1), `minResources` is `minMember` times the pod's quota usage, the
queue from the pod's `scheduling.volcano.sh/queue-name`, and a networkTopology from the pod's
`volcano.sh/network-topology-mode` / `volcano.sh/network-topology-highest-tier` (`parseNetworkTopologyFromPod`:
either one makes it, mode `hard` unless the other says `soft` in any case; a mode or tier that does not parse is
left out and reported, as Volcano logs it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from controller.quota import pod_quota_usage, scaled, scheduler_view, to_resource_list
from lapilli.api.constants import (
    COOLDOWN_TIME_KEY,
    GROUP_MIN_MEMBER_ANNOTATION,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION,
    NETWORK_TOPOLOGY_MODE_ANNOTATION,
    PODGROUP_KIND,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    REVOCABLE_ZONE_KEY,
    SCHEDULING_API_VERSION,
)
from lapilli.meta import Obj, annotations_of, meta, owner_references
from lapilli.plainpods import podgroup_name_for

_FROM_POD: Final = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY, REVOCABLE_ZONE_KEY, JDB_MIN_AVAILABLE_KEY,
                    JDB_MAX_UNAVAILABLE_KEY)
_GO_INT: Final = re.compile(r"[+-]?[0-9]+")  # what strconv.Atoi takes
_PLURALS: Final = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "Deployment": "deployments",
                   "DaemonSet": "daemonsets", "Job": "jobs", "ReplicationController": "replicationcontrollers"}


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


def network_topology(pod: Obj) -> tuple[dict[str, Any] | None, list[str]]:
    """The networkTopology the pod's annotations ask for (None without either key), and what could not be read.

    A negative tier is refused too: the PodGroup CRD would refuse it (`minimum: 0`) and the pod would never get a
    PodGroup, where Volcano's controller retries the create forever.
    """
    notes = annotations_of(pod)
    mode, tier = notes.get(NETWORK_TOPOLOGY_MODE_ANNOTATION), notes.get(NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION)
    if mode is None and tier is None:
        return None, []
    out: dict[str, Any] = {"mode": "hard"}
    problems = []
    if mode is not None:
        if mode.lower() in ("hard", "soft"):
            out["mode"] = mode.lower()
        else:
            problems.append(f"{NETWORK_TOPOLOGY_MODE_ANNOTATION} {mode!r} is neither hard nor soft: hard is used")
    if tier is not None:
        if _GO_INT.fullmatch(tier) and int(tier) >= 0:
            out["highestTierAllowed"] = int(tier)
        else:
            problems.append(f"{NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION} {tier!r} is not a tier (an integer >= 0): "
                            "no tier limit is set")
    return out, problems


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
    topology, _problems = network_topology(pod)
    if topology is not None:
        pg_spec["networkTopology"] = topology
    return {"apiVersion": SCHEDULING_API_VERSION, "kind": PODGROUP_KIND, "metadata": pg_meta, "spec": pg_spec}
