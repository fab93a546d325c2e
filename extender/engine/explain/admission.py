"""Why enqueue did not admit a PodGroup (Pending → Inqueue), per resource, with the numbers the plugins voted on.

proportion and capacity admit while minResources + allocated + inqueue − elastic ≤ realCapability on every
resource minResources asks for; overcommit while inqueue + minResources ≤ total × factor − used. Here the same
sums, taken from the plugins when they voted, say which resource is short and by how much.
"""

from __future__ import annotations

import math

import numpy as np

from extender.engine.explain.probe import ClusterView, QuotaView
from extender.engine.explain.report import Kind, Reason
from extender.engine.explain.units import amount, number, resource_rank
from lapilli.resources.units import PODS
from lapilli.resources.vector import TOLERANCE, Dims, Vec


def _dims_of(dims: Dims, need: Vec) -> list[tuple[str, int]]:
    named = [(name, i) for i, name in enumerate(dims.names) if need[i] > 0 and name != PODS]
    return sorted(named, key=lambda item: resource_rank(item[0]))


def queue_shortage(dims: Dims, queue: str, capability: Vec, need: Vec, view: QuotaView) -> Reason | None:
    """OverCapability: `needs nvidia.com/gpu 4; queue lab-a may use 2 more of its capability 8`."""
    used = view.allocated + view.inqueue - view.elastic
    parts, data = [], {}
    for name, i in _dims_of(dims, need):
        room = float(view.real_capability[i] - used[i])
        if need[i] + used[i] <= view.real_capability[i]:  # the plugins' own test, on this resource
            continue
        limit = float(view.real_capability[i])
        spec = float(capability[i])
        if math.isfinite(spec) and spec <= limit + TOLERANCE:
            what = f"its capability {amount(name, limit)}"
        else:  # realCapability: the cluster less the other queues' guarantees
            what = f"the {amount(name, limit)} it can hold (no capability set)"
        parts.append(
            f"needs {name} {amount(name, float(need[i]))}; queue {queue} may use "
            f"{amount(name, max(room, 0.0))} more of {what}"
        )
        data[name] = {
            "need": number(name, float(need[i])), "room": number(name, max(room, 0.0)),
            "limit": number(name, limit), "allocated": number(name, float(view.allocated[i])),
            "inqueue": number(name, float(view.inqueue[i])), "elastic": number(name, float(view.elastic[i])),
            "deserved": number(name, float(view.deserved[i])), "guarantee": number(name, float(view.guarantee[i])),
        }
    if not parts:
        return None
    return Reason(Kind.OVER_CAPABILITY, "not admitted: " + "; ".join(parts) + f" (by {view.plugin})",
                  {"queue": queue, "plugin": view.plugin, "resources": data})


def cluster_shortage(dims: Dims, need: Vec, view: ClusterView, total: Vec) -> Reason | None:
    """ClusterFull: overcommit's room = total × factor − used − reserved by admitted jobs."""
    room = view.idle - view.inqueue
    parts, data = [], {}
    for name, i in _dims_of(dims, need):
        if view.inqueue[i] + need[i] <= view.idle[i]:
            continue
        parts.append(
            f"needs {name} {amount(name, float(need[i]))}; the cluster has room for "
            f"{amount(name, max(float(room[i]), 0.0))} more ({amount(name, float(total[i]))} × {view.factor:g} "
            f"overcommit, less what runs and what admitted jobs reserve)"
        )
        data[name] = {"need": number(name, float(need[i])), "room": number(name, max(float(room[i]), 0.0)),
                      "total": number(name, float(total[i])), "reserved": number(name, float(view.inqueue[i]))}
    if not parts:
        return None
    return Reason(Kind.CLUSTER_FULL, "not admitted: " + "; ".join(parts), {"factor": view.factor, "resources": data})


def never_admissible(
    dims: Dims, queue: str, need: Vec, limit: Vec, total: Vec,
    lead: str = "this gang can never be admitted as the cluster and queue are set up",
) -> Reason | None:
    """Unresolvable: `need` (minResources, or what the gang's pods ask) above the queue's capability or the whole
    cluster, on some resource."""
    parts, data = [], {}
    for name, i in _dims_of(dims, need):
        if need[i] > total[i] + TOLERANCE:
            parts.append(f"needs {name} {amount(name, float(need[i]))}; the whole cluster has "
                         f"{amount(name, float(total[i]))}")
            data[name] = {"need": number(name, float(need[i])), "cluster": number(name, float(total[i]))}
        elif need[i] > limit[i] + TOLERANCE:
            parts.append(f"needs {name} {amount(name, float(need[i]))}; queue {queue} may never hold more than "
                         f"{amount(name, float(limit[i]))}")
            data[name] = {"need": number(name, float(need[i])), "limit": number(name, float(limit[i]))}
    if not parts:
        return None
    return Reason(Kind.UNRESOLVABLE, f"{lead}: " + "; ".join(parts),
                  {"resources": data})


def gang_floor(requests: list[Vec], min_member: int, dims: Dims) -> Vec:
    """The least any `min_member` of these pods ask together, per resource (the smallest requests of each): what
    the gang needs to run at all, from its pods' effective requests — a PodGroup's minResources can leave out what
    only a container's limit asks (a Job template is not defaulted the way a pod is)."""
    if not requests or min_member <= 0:
        return dims.zeros()
    stacked = np.sort(np.stack(requests), axis=0)
    return stacked[:min_member].sum(axis=0)


def would_fit_at_open(need: Vec, quota: QuotaView | None, cluster: ClusterView | None) -> bool:
    """Would minResources have been admitted against what the session opened with (before jobs ordered ahead
    were admitted this session)?"""
    if quota is not None:
        used = quota.allocated + quota.inqueue - quota.elastic
        mask = need > 0
        if np.any((need + used)[mask] > quota.real_capability[mask]):
            return False
    if cluster is not None:
        mask = need > 0
        if np.any((cluster.inqueue + need)[mask] > cluster.idle[mask]):
            return False
    return True
