"""How a pod's containers add up to the pod's own resources (Kubernetes' `resourcehelper.PodRequests`/`PodLimits`).

The regular containers run together, so they add up; each init container runs beside the restartable sidecar
init containers started before it, and a sidecar (`restartPolicy: Always`) keeps running next to the regular
containers too: the pod needs the larger of the init phase's peak and the steady state. Overhead and `pods` are the
caller's: the scheduler and the quota count them differently. The numbers are whatever the caller reads
(the scheduler's float units, the quota's exact fractions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

N = TypeVar("N", float, Fraction)


def add_into(into: dict[str, N], other: Mapping[str, N]) -> None:
    for name, value in other.items():
        into[name] = into[name] + value if name in into else value


def _max_into(into: dict[str, N], other: Mapping[str, N]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):  # a zero never adds a name the sum did not have
            into[name] = value


def containers_total(spec: Mapping[str, Any], read: Callable[[Mapping[str, Any]], dict[str, N]]) -> dict[str, N]:
    """The containers' and init containers' resources of a pod spec, each container read by `read`."""
    total: dict[str, N] = {}
    for container in spec.get("containers") or []:
        add_into(total, read(container))
    sidecars: dict[str, N] = {}
    init_peak: dict[str, N] = {}
    for init in spec.get("initContainers") or []:
        own = read(init)
        if init.get("restartPolicy") == "Always":
            add_into(sidecars, own)
            add_into(total, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            add_into(during, sidecars)
        _max_into(init_peak, during)
    # The peak of the init phase is compared with the steady state once, at the end: a sidecar started after an
    # init container never ran beside it.
    _max_into(total, init_peak)
    return total
