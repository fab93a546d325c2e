"""Where a planned pod may move, as far as the predicates that depend on other pods decide (pod affinity and
anti-affinity, topology spread, host ports): the engine's own evaluation, over the cluster as the extender sees it.

When kube-scheduler does not offer a pod its planned node, filter (and bind) move it to another offered node it fits.
kube-scheduler's own filters have already judged the offered nodes against the pods it knows (bound, and the gang
members parked at bind, which it has assumed); what it does not know is the rest of the plan: siblings and other
gangs' members planned but not yet through its queue. So the candidates are judged by a session opened over the
nodes, the pod's gang, and the pods that matter to it — those its own terms select and those that carry terms —
each where it is bound or planned. A pod whose placement no term concerns (the common case) is left to the resource
fit without opening anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from extender.engine.conf import SchedulerConf
from extender.engine.run import open_session
from extender.engine.snapshot import PodRecord, Snapshot
from lapilli.podterms import PodSelector

_ENDED = ("Succeeded", "Failed")


def _selectors(pod: PodRecord) -> list[tuple[str | None, PodSelector]]:
    """(namespace to match or None for any, selector) of the pod's own required terms and hard spread."""
    terms = pod.terms
    if terms is None:
        return []
    out: list[tuple[str | None, PodSelector]] = [(None, t.selector) for t in (*terms.affinity, *terms.anti_affinity)]
    out += [(pod.namespace, c.selector) for c in terms.hard_spread]
    return out


def _concerns(pod: PodRecord, other: PodRecord, selectors: list[tuple[str | None, PodSelector]]) -> bool:
    if other.terms is not None or (pod.host_ports and other.host_ports):
        return True
    return any((ns is None or ns == other.namespace) and selector.matches(other.labels) for ns, selector in selectors)


def _relevant(snap: Snapshot, placements: Mapping[str, str], pod: PodRecord) -> dict[str, PodRecord]:
    """The other pods that can matter to `pod`'s placement, each on the node it is bound or planned to."""
    selectors = _selectors(pod)
    out: dict[str, PodRecord] = {}
    for key, other in snap.pods.items():
        if other is pod or other.phase in _ENDED:
            continue
        node = other.node_name or placements.get(key)
        if node is not None and _concerns(pod, other, selectors):
            out[key] = other if other.node_name else dataclasses.replace(other, node_name=node)
    return out


def allowed(snap: Snapshot, placements: Mapping[str, str], conf: SchedulerConf, key: str,
            candidates: Sequence[str]) -> list[str]:
    """The `candidates` (node names) where the pod `key` may go as far as the placement-dependent predicates of
    `conf` decide, with every other pod where it is bound or planned (`placements`: pod key -> planned node)."""
    pod = snap.pods.get(key)
    if pod is None or not candidates:
        return list(candidates)
    others = _relevant(snap, placements, pod)
    if pod.terms is None and not pod.host_ports and all(p.terms is None for p in others.values()):
        return list(candidates)
    group = f"{pod.namespace}/{pod.group}"
    podgroup = snap.podgroups.get(group)
    queue = snap.queues.get(podgroup.queue) if podgroup is not None else None
    if podgroup is None or queue is None:
        return list(candidates)
    mini = Snapshot(nodes=dict(snap.nodes), queues={queue.name: queue}, podgroups={group: podgroup},
                    priority_classes=dict(snap.priority_classes), default_priority=snap.default_priority,
                    namespaces=dict(snap.namespaces))
    mini.pods.update(others)
    mini.pods[key] = dataclasses.replace(pod, node_name=None, phase="Pending")
    ssn = open_session(mini, conf)
    task = next((t for t in ssn.tasks.values() if t.key == key), None)
    if task is None:
        return list(candidates)
    return [n for n in candidates if n in ssn.node_by_name and ssn.predicate_node(task, ssn.node_by_name[n])]


def order_dependent(snap: Snapshot, key: str) -> bool:
    """Whether kube-scheduler's verdict on the pod depends on the order it meets its gang's members in (DoNotSchedule
    spread: each member is checked against those placed before it; affinity and anti-affinity are pairwise)."""
    pod = snap.pods.get(key)
    return pod is not None and pod.terms is not None and bool(pod.terms.hard_spread)


__all__ = ["allowed", "order_dependent"]
