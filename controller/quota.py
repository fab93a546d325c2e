"""A pod's ResourceQuota usage, the unit of a PodGroup's `minResources`.

Mirrors Volcano's `util.GetPodQuotaUsage` = Kubernetes' `quota/v1/evaluator/core.PodUsageFunc` plus a copy of
every extended resource without its `requests.` prefix. For a pod spec: `count/pods` and `pods` 1; `cpu`,
`requests.cpu`, `limits.cpu` and the same for `memory` and `ephemeral-storage`; hugepages under their own name
and `requests.<name>`; extended resources (`nvidia.com/gpu`) as `requests.<name>` and `<name>`. Requests are the
sum of the containers, max'd with each init container (restartable sidecars added), plus the pod overhead —
exactly what `resourcehelper.PodRequests` computes. Limits only count where given: a template is not defaulted
by the API server, so a container with limits and no requests adds nothing to `cpu`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, Final

from lapilli.resources import format_quantity, parse_quantity
from lapilli.resources.podsum import add_into, containers_total

Usage = dict[str, Fraction]

_COMPUTE: Final = ("cpu", "memory", "ephemeral-storage")
_BINARY: Final = ("memory", "ephemeral-storage")
_REQUESTS: Final = "requests."


def _is_native(name: str) -> bool:
    domain, slash, _ = name.partition("/")
    return not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")


def is_extended(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: domain-qualified outside kubernetes.io, not a `requests.` quota name."""
    return not _is_native(name) and not name.startswith(_REQUESTS)


def _list(container: Mapping[str, Any], kind: str) -> Usage:
    resources = container.get("resources") or {}
    return {name: parse_quantity(value) for name, value in (resources.get(kind) or {}).items()}


def pod_totals(spec: Mapping[str, Any], kind: str) -> Usage:
    """`PodRequests` (kind "requests") or `PodLimits` ("limits") of a pod spec."""
    total = containers_total(spec, lambda container: _list(container, kind))
    for name, value in (spec.get("overhead") or {}).items():
        if kind == "requests" or name in total:
            total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
    return total


def pod_quota_usage(spec: Mapping[str, Any]) -> Usage:
    """The quota usage of one pod of this spec."""
    requests, limits = pod_totals(spec, "requests"), pod_totals(spec, "limits")
    usage: Usage = {"count/pods": Fraction(1), "pods": Fraction(1)}
    for name in _COMPUTE:
        if name in requests:
            usage[name] = usage[_REQUESTS + name] = requests[name]
        if name in limits:
            usage["limits." + name] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[_REQUESTS + name] = value
        elif is_extended(name):
            usage[_REQUESTS + name] = usage[name] = value
    return usage


def scheduler_view(usage: Mapping[str, Fraction]) -> Usage:
    """The part of a quota usage Volcano's scheduler reads from `minResources` (reference §3.3): cpu, memory,
    ephemeral-storage, pods, hugepages and extended resources — not the `requests.*` / `limits.*` / `count/*`
    quota keys. Volcano writes those too; Lapilli leaves them out, so a scheduler that takes every name as a
    resource (ours does) cannot trip over a `count/pods` no node has."""
    return {
        name: value for name, value in usage.items()
        if not name.startswith((_REQUESTS, "limits.", "count/"))
    }


def scaled(usage: Mapping[str, Fraction], count: int) -> Usage:
    return {name: value * count for name, value in usage.items()} if count > 0 else {}


def total(usages: Iterable[Mapping[str, Fraction]]) -> Usage:
    out: Usage = {}
    for usage in usages:
        add_into(out, usage)
    return out


def to_resource_list(usage: Mapping[str, Fraction]) -> dict[str, str]:
    """Quantities as Kubernetes writes them (memory-like ones in binary units when exact), sorted by name."""
    return {
        name: format_quantity(value, binary=name.removeprefix(_REQUESTS).removeprefix("limits.") in _BINARY)
        for name, value in sorted(usage.items())
    }


def same_resources(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Equal as quantities ("1Gi" == "1024Mi"); None and {} differ, as a nil and an empty ResourceList do."""
    if a is None or b is None:
        return a is None and b is None
    try:
        return {k: parse_quantity(v) for k, v in a.items()} == {k: parse_quantity(v) for k, v in b.items()}
    except ValueError:
        return False
