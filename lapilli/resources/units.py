"""Volcano's resource units and a pod's request (`pkg/scheduler/api/resource_info.go`, `pod_info.go`).

Inside the scheduler every quantity is a float: cpu in millicores, memory in bytes, `pods` in whole units and every
other ("scalar") resource in milli-units (so `nvidia.com/gpu: 1` is 1000). A pod's request is the sum of its regular
containers, max'd with each init container (restartable sidecar init containers are added instead), plus the pod
overhead, plus the implicit `pods: 1`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final

from lapilli.resources.podsum import add_into, containers_total
from lapilli.resources.quantity import parse_quantity

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
GPU: Final = "nvidia.com/gpu"

Units = dict[str, float]


def to_units(name: str, quantity: str | int | float) -> float:
    """One quantity in Volcano's unit for `name`. Cached: exact parsing is costly, and a cluster's pods and nodes
    repeat a handful of quantity strings in every watch event."""
    try:
        return _cached_units(name, quantity)
    except TypeError:  # unhashable, so not a quantity at all: the parser says why
        return _units(name, quantity)


def _units(name: str, quantity: str | int | float) -> float:
    value = parse_quantity(quantity)
    if name in (MEMORY, PODS):
        return float(value)
    return float(value * 1000)


# typed: True must not share 1's entry (the parser refuses bools).
_cached_units = functools.lru_cache(maxsize=4096, typed=True)(_units)


def resource_list_units(resources: Mapping[str, Any] | None) -> Units:
    """A Kubernetes ResourceList in Volcano's units. Raises QuantityError naming the resource on bad input."""
    out: Units = {}
    for name, quantity in (resources or {}).items():
        try:
            out[name] = to_units(name, quantity)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from exc
    return out


def _requests(container: Mapping[str, Any]) -> Units:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are given.
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return resource_list_units(merged)


def pod_request(spec: Mapping[str, Any]) -> Units:
    """Volcano's `Resreq` of a pod spec: containers, init containers, overhead and `pods: 1`."""
    total = containers_total(spec, _requests)
    add_into(total, resource_list_units(spec.get("overhead")))
    total[PODS] = total.get(PODS, 0.0) + 1.0
    return total


def names_in(*resources: Iterable[str]) -> list[str]:
    """Resource names in a stable order: cpu, memory and pods always, then the rest by name."""
    seen: set[str] = set()
    for group in resources:
        seen.update(group)
    head = [CPU, MEMORY, PODS]
    return head + sorted(seen - set(head))
