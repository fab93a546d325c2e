"""Pod-template checks of a Job's tasks — the parts of upstream `ValidatePodTemplate` and Volcano's
`validateTaskTopoPolicy` that catch what would otherwise only fail later, when the controller creates pods.

Checked: at least one container; container names (required, DNS-1123 label, unique across init and regular
containers); image; pod-level resources (`webhook.jobs.podresources`); `restartPolicy`; resource quantities
(valid, ≥ 0, requests ≤ limits); and for a task with a `topologyPolicy` other than `none`, a Guaranteed pod
with integer CPUs. Messages follow apimachinery's field
errors and are prefixed `spec.task[<i>].` and joined with `. ` as in Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final

from lapilli.api import TaskSpec
from lapilli.resources import QuantityError, parse_quantity
from webhook.jobs.podresources import pod_resources_errors
from webhook.names import LABEL_ERROR, dns1123_label

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")


@lru_cache(maxsize=4096)
def _cached(value: str | int | float) -> Fraction:
    # Templates repeat a handful of quantity strings ("8", "32Gi") in every review; parsing one into an exact
    # Fraction costs ~10 us, which dominated a Job's validation before this cache.
    return parse_quantity(value)


def quantity(value: object) -> Fraction:
    """`parse_quantity`, cached for hashable scalars; raises `QuantityError` like it."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return _cached(value)
    return parse_quantity(value)  # type: ignore[arg-type]  # reports the wrong type


def _quantities(resources: Mapping[str, Any], kind: str, path: str, errors: list[str]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    raw = resources.get(kind)
    for name, value in raw.items() if isinstance(raw, Mapping) else []:
        where = f"{path}.resources.{kind}[{name}]"
        try:
            parsed = quantity(value)
        except QuantityError:
            errors.append(f'{where}: Invalid value: "{value}": must be a valid quantity')
            continue
        if parsed < 0:
            errors.append(f'{where}: Invalid value: "{value}": must be greater than or equal to 0')
        out[str(name)] = parsed
    return out


def _container_errors(container: Mapping[str, Any], path: str, names: set[str]) -> list[str]:
    errors: list[str] = []
    name = container.get("name")
    if not name:
        errors.append(f"{path}.name: Required value")
    elif not isinstance(name, str):
        errors.append(f'{path}.name: Invalid value: "{name}": {LABEL_ERROR}')
    elif dns1123_label(name):
        errors += [f'{path}.name: Invalid value: "{name}": {m}' for m in dns1123_label(name)]
    elif name in names:
        errors.append(f'{path}.name: Duplicate value: "{name}"')
    else:
        names.add(name)
    if not container.get("image"):
        errors.append(f"{path}.image: Required value")
    resources = container.get("resources")
    if isinstance(resources, Mapping):
        limits = _quantities(resources, "limits", path, errors)
        for resource, request in _quantities(resources, "requests", path, errors).items():
            if resource in limits and request > limits[resource]:
                errors.append(
                    f'{path}.resources.requests: Invalid value: "{resources["requests"][resource]}": '
                    f"must be less than or equal to {resource} limit"
                )
    return errors


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = spec.get(key)
    return [c for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def template_errors(task: TaskSpec) -> list[str]:
    """apimachinery-style field errors of the task's pod template (paths start at `template`)."""
    spec = task.template.get("spec") or {}
    errors: list[str] = []
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for j, container in enumerate(_containers(spec, key)):
            errors += _container_errors(container, f"template.spec.{key}[{j}]", names)
    if not _containers(spec, "containers"):
        errors.append("template.spec.containers: Required value")
    errors += pod_resources_errors(spec)
    policy = spec.get("restartPolicy")
    if policy and policy not in RESTART_POLICIES:
        supported = ", ".join(f'"{p}"' for p in RESTART_POLICIES)
        errors.append(f'template.spec.restartPolicy: Unsupported value: "{policy}": supported values: {supported}')
    return errors


def _resource_map(container: Mapping[str, Any], kind: str) -> dict[str, Fraction]:
    resources = container.get("resources")
    raw = resources.get(kind) if isinstance(resources, Mapping) else None
    return {str(k): quantity(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def _requests(container: Mapping[str, Any]) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    limits = _resource_map(container, "limits")
    requests = _resource_map(container, "requests")
    return (requests or dict(limits)), limits  # Volcano uses limits as requests when none are given


def _qos(containers: list[Mapping[str, Any]]) -> str:
    """`v1qos.GetPodQOS` over cpu and memory."""
    guaranteed = True
    any_set = False
    for container in containers:
        requests, limits = _requests(container)
        for resource in ("cpu", "memory"):
            request, limit = requests.get(resource, Fraction(0)), limits.get(resource, Fraction(0))
            any_set = any_set or request > 0 or limit > 0
            if limit == 0 or request != limit:
                guaranteed = False
    if guaranteed and any_set:
        return "Guaranteed"
    return "Burstable" if any_set else "BestEffort"


def topology_error(task: TaskSpec, index: int) -> str:
    """Volcano's `validateTaskTopoPolicy` for tasks with a NUMA topology policy."""
    if task.topology_policy in (None, "", "none"):
        return ""
    spec = task.template.get("spec") or {}
    every = _containers(spec, "containers") + _containers(spec, "initContainers")
    qos = _qos(every)
    if qos != "Guaranteed":
        return f"spec.task[{index}] isn't Guaranteed pod, kind={qos}"
    for j, container in enumerate(every):
        cpu = _requests(container)[0].get("cpu", Fraction(0))
        if cpu == 0 or cpu.denominator != 1:
            return f"the cpu request isn't an integer in spec.task[{index}] container[{j}]."
    return ""


def task_template_message(task: TaskSpec, index: int) -> str:
    """The job-webhook fragment for one task's template, or ""."""
    errors = template_errors(task)
    if errors:
        return f"spec.task[{index}]." + "".join(f"{e}. " for e in errors)
    try:
        return topology_error(task, index)
    except QuantityError:
        return ""  # unreachable: template_errors already reported bad quantities
