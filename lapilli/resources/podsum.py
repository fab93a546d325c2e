"""How a pod's containers add up to the pod's own resources (Kubernetes' `resourcehelper.PodRequests`/`PodLimits`).

The regular containers run together, so they add up; each init container runs beside the restartable sidecar
init containers started before it, and a sidecar (`restartPolicy: Always`) keeps running next to the regular
containers too: the pod needs the larger of the init phase's peak and the steady state. Overhead and `pods` are the
caller's: the scheduler and the quota count them differently. The amounts are whatever the caller reads: the
scheduler's float units and the quota's exact fractions through `containers_total`, the webhook's quantities that
keep their printing format through `sum_containers` with its own add and compare.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

N = TypeVar("N", float, Fraction)
A = TypeVar("A")

Add = Callable[[A, A], A]  # what one amount and another make together
Exceeds = Callable[[A, A | None], bool]  # whether an amount replaces the peak so far (None: the name has none)


def _add_into(into: dict[str, A], other: Mapping[str, A], add: Add[A]) -> None:
    for name, value in other.items():
        into[name] = add(into[name], value) if name in into else value


def _max_into(into: dict[str, A], other: Mapping[str, A], exceeds: Exceeds[A]) -> None:
    for name, value in other.items():
        if exceeds(value, into.get(name)):
            into[name] = value


def add_into(into: dict[str, N], other: Mapping[str, N]) -> None:
    _add_into(into, other, operator.add)


def _above_zero(value: N, peak: N | None) -> bool:
    # A zero never adds a name the sum did not have.
    return value > (0 if peak is None else peak)


def sum_containers(
    spec: Mapping[str, Any], read: Callable[[Mapping[str, Any]], dict[str, A]], add: Add[A], exceeds: Exceeds[A]
) -> dict[str, A]:
    """The containers' and init containers' resources of a pod spec, each container read by `read`, amounts added
    by `add` and the init phase's peak kept by `exceeds`."""
    total: dict[str, A] = {}
    for container in spec.get("containers") or []:
        _add_into(total, read(container), add)
    sidecars: dict[str, A] = {}
    init_peak: dict[str, A] = {}
    for init in spec.get("initContainers") or []:
        own = read(init)
        if init.get("restartPolicy") == "Always":
            _add_into(sidecars, own, add)
            _add_into(total, own, add)
            during = dict(sidecars)
        else:
            during = dict(own)
            _add_into(during, sidecars, add)
        _max_into(init_peak, during, exceeds)
    # The peak of the init phase is compared with the steady state once, at the end: a sidecar started after an
    # init container never ran beside it.
    _max_into(total, init_peak, exceeds)
    return total


def containers_total(spec: Mapping[str, Any], read: Callable[[Mapping[str, Any]], dict[str, N]]) -> dict[str, N]:
    """`sum_containers` over plain numbers."""
    return sum_containers(spec, read, operator.add, _above_zero)
