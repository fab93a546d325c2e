"""Pod-level resources of a task template (`template.spec.resources`, Kubernetes' PodLevelResources, on by default
since 1.34) — the part of upstream `ValidatePodTemplate` that Volcano's job webhook runs with that feature on.

Checked as upstream does after defaulting the template: only `cpu`, `memory` and `hugepages-*` at pod level, no
`claims`; quantities valid and ≥ 0; requests ≤ limits (hugepages: equal, and a limit is required); hugepages need
cpu or memory; pod requests ≥ the containers' aggregate requests (init and sidecar containers counted as the
kubelet counts them); a pod hugepages limit ≥ the containers' aggregate limits; no container limit above the pod
limit. Defaulting first: with pod limits set, a missing pod request becomes the containers' aggregate request
(overcommittable resources), else the pod limit. Paths start at `template.spec`; quantities read as Go prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from lapilli.resources import QuantityError, parse_quantity
from lapilli.resources.podsum import sum_containers
from webhook.goquantity import Format, format_of, format_value
from webhook.queues.resources import quantity_errors

PATH: Final = "template.spec.resources"
HUGEPAGES: Final = "hugepages-"
SUPPORTED: Final = '"cpu", "hugepages-", "memory"'

Amount = tuple[Fraction, Format]  # the value and the format Go keeps for printing it
Amounts = dict[str, Amount]


def _show(amount: Amount) -> str:
    return format_value(*amount)


def _amounts(raw: object) -> Amounts:
    """A resource list with its unparseable entries left out (they are reported separately)."""
    out: Amounts = {}
    for name, value in raw.items() if isinstance(raw, Mapping) else ():
        try:
            out[str(name)] = (parse_quantity(value), format_of(value))
        except (QuantityError, TypeError):
            continue
    return out


def _add(have: Amount, value: Amount) -> Amount:
    return have[0] + value[0], have[1]  # the sum keeps the first amount's format


def _exceeds(value: Amount, peak: Amount | None) -> bool:
    # Unlike the scheduler's sum, a zero enters the peak: defaulting then reads the name as set.
    return peak is None or value[0] > peak[0]


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = spec.get(key)
    return [c for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def _side(container: Mapping[str, Any], kind: str) -> Amounts:
    resources = container.get("resources")
    return _amounts(resources.get(kind) if isinstance(resources, Mapping) else None)


def aggregate(spec: Mapping[str, Any], kind: str) -> Amounts:
    """`AggregateContainerRequests` / `AggregateContainerLimits`: the regular containers plus sidecars (init
    containers with `restartPolicy: Always`), or the largest init container with the sidecars started before it."""
    containers = {key: _containers(spec, key) for key in ("containers", "initContainers")}
    return sum_containers(containers, lambda container: _side(container, kind), _add, _exceeds)


def _is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES)


def _supported(name: str) -> bool:
    return name in ("cpu", "memory") or _is_hugepages(name)


def _page_size(name: str) -> Fraction | None:
    try:
        return parse_quantity(name[len(HUGEPAGES):])
    except QuantityError:
        return None


def _list_errors(raw: object, kind: str) -> list[str]:
    """Names and quantities of one side (`requests` or `limits`)."""
    errors: list[str] = []
    for name, value in raw.items() if isinstance(raw, Mapping) else ():
        where = f"{PATH}.{kind}[{name}]"
        if not _supported(str(name)):
            errors.append(f'{where}: Unsupported value: "{name}": supported values: {SUPPORTED}')
        errors += quantity_errors(value, str(name), where)
        size = _page_size(str(name)) if _is_hugepages(str(name)) else None
        try:
            quantity = parse_quantity(value)
        except (QuantityError, TypeError):
            continue
        if size and (quantity / size).denominator != 1:
            shown = format_value(quantity, format_of(value))
            errors.append(f'{where}: Invalid value: "{shown}": {shown} is not positive integer multiple of {name}')
    return errors


def _requirement_errors(resources: Mapping[str, Any]) -> list[str]:
    """`validateResourceRequirements` with the pod-level resource names."""
    raw_limits, raw_requests = resources.get("limits"), resources.get("requests")
    errors = _list_errors(raw_limits, "limits") + _list_errors(raw_requests, "requests")
    limits, requests = _amounts(raw_limits), _amounts(raw_requests)
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is None:
            if _is_hugepages(name):
                errors.append(f"{PATH}.limits: Required value: Limit must be set for non overcommitable resources")
        elif _is_hugepages(name) and request[0] != limit[0]:
            detail = f"must be equal to {name} limit of {_show(limit)}"
            errors.append(f'{PATH}.requests: Invalid value: "{_show(request)}": {detail}')
        elif request[0] > limit[0]:
            detail = f"must be less than or equal to {name} limit of {_show(limit)}"
            errors.append(f'{PATH}.requests: Invalid value: "{_show(request)}": {detail}')
    names = {str(n) for side in (raw_limits, raw_requests) if isinstance(side, Mapping) for n in side}
    if any(_is_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        errors.append(f"{PATH}: Forbidden: HugePages require cpu or memory")
    return errors


def defaulted_requests(spec: Mapping[str, Any], requests: Amounts, limits: Amounts) -> Amounts:
    """`defaultPodRequests`: only when pod limits are set."""
    if not limits:
        return requests
    out = dict(requests)
    for name, amount in aggregate(spec, "requests").items():
        if name not in out and _supported(name) and not _is_hugepages(name):
            out[name] = amount
    for name, amount in limits.items():
        if name not in out and _supported(name):
            out[name] = amount
    return out


def _consistency_errors(spec: Mapping[str, Any], resources: Mapping[str, Any]) -> list[str]:
    """`validatePodResourceConsistency`."""
    errors: list[str] = []
    limits = _amounts(resources.get("limits"))
    requests = defaulted_requests(spec, _amounts(resources.get("requests")), limits)
    for name, total in aggregate(spec, "requests").items():
        pod = requests.get(name)
        if pod is not None and total[0] > pod[0]:
            detail = f"must be greater than or equal to aggregate container requests of {_show(total)}"
            errors.append(f'{PATH}.requests[{name}]: Invalid value: "{_show(pod)}": {detail}')
    for name, total in aggregate(spec, "limits").items():
        pod = limits.get(name)
        if _is_hugepages(name) and pod is not None and total[0] > pod[0]:
            detail = f"must be greater than or equal to aggregate container limits of {_show(total)}"
            errors.append(f'{PATH}.limits[{name}]: Invalid value: "{_show(pod)}": {detail}')
    for i, container in enumerate(_containers(spec, "containers")):
        for name, limit in _side(container, "limits").items():
            pod = limits.get(name)
            if pod is not None and limit[0] > pod[0]:
                detail = f"must be less than or equal to pod limits of {_show(pod)}"
                errors.append(f'{PATH}.containers[{i}][{name}].limits: Invalid value: "{_show(limit)}": {detail}')
    return errors


def pod_resources_errors(spec: Mapping[str, Any]) -> list[str]:
    """apimachinery-style field errors of a template's pod-level resources ([] when it has none)."""
    resources = spec.get("resources")
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [f'{PATH}: Invalid value: "{resources}": must be an object with requests and limits']
    errors: list[str] = []
    if resources.get("claims") is not None:
        errors.append(f"{PATH}.claims: Forbidden: claims cannot be set for Resources at pod-level")
    errors += _requirement_errors(resources)
    return errors + _consistency_errors(spec, resources)
