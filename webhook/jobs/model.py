"""A Volcano Job (`batch.volcano.sh/v1alpha1`) decoded once into slim typed values for the job rules.

Mirrors the fields of Volcano's `JobSpec`/`TaskSpec` that admission reads; the pod template stays a dict.
`decode_job` raises `DecodeError` for a wrongly typed field, which the rules turn into a denial — the
counterpart of `schema.DecodeJob` failing in Volcano's webhook.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.decode import DecodeError, boolean, element, integer, items, mapping, string


@dataclass(frozen=True, slots=True)
class Policy:
    events: tuple[str, ...]  # `event` and `events` merged, duplicates removed, in order
    action: str
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class Partition:
    total: int
    size: int
    min_partitions: int
    network_topology: Mapping[str, Any]  # {} when absent


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    replicas: int
    min_available: int | None
    max_retry: int | None
    policies: tuple[Policy, ...]
    template: Mapping[str, Any]
    depends_on: tuple[str, ...] | None
    partition: Partition | None
    topology_policy: str


@dataclass(frozen=True, slots=True)
class Volume:
    mount_path: str
    claim_name: str
    has_claim: bool


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    namespace: str
    min_available: int
    max_retry: int
    ttl: int | None
    queue: str
    scheduler_name: str
    tasks: tuple[Task, ...]
    policies: tuple[Policy, ...]
    plugins: Mapping[str, Any] | None
    volumes: tuple[Volume, ...]
    network_topology: Mapping[str, Any]


def decode_policies(parent: Mapping[str, Any], path: str) -> tuple[Policy, ...]:
    out = []
    for i, raw in enumerate(items(parent, "policies", path)):
        where = f"{path}.policies[{i}]"
        policy = element(raw, where)
        events = [string(policy, "event", where)] if policy.get("event") else []
        for j, event in enumerate(items(policy, "events", where)):
            if not isinstance(event, str):
                raise DecodeError(f"{where}.events[{j}]", "a string", event)
            events.append(event)
        unique = tuple(dict.fromkeys(e for e in events if e))
        out.append(Policy(unique, string(policy, "action", where), integer(policy, "exitCode", where)))
    return tuple(out)


def _partition(task: Mapping[str, Any], path: str) -> Partition | None:
    if task.get("partitionPolicy") is None:
        return None
    raw = mapping(task, "partitionPolicy", path)
    where = f"{path}.partitionPolicy"
    return Partition(
        total=integer(raw, "totalPartitions", where) or 0,
        size=integer(raw, "partitionSize", where) or 0,
        min_partitions=integer(raw, "minPartitions", where) or 0,
        network_topology=mapping(raw, "networkTopology", where),
    )


def _depends_on(task: Mapping[str, Any], path: str) -> tuple[str, ...] | None:
    if task.get("dependsOn") is None:
        return None
    raw = mapping(task, "dependsOn", path)
    names = items(raw, "name", f"{path}.dependsOn")
    return tuple(str(n) for n in names)


def decode_task(raw: object, path: str) -> Task:
    task = element(raw, path)
    template = mapping(task, "template", path)
    spec = mapping(template, "spec", f"{path}.template")
    boolean(spec, "hostNetwork", f"{path}.template.spec")
    return Task(
        name=string(task, "name", path),
        replicas=integer(task, "replicas", path) or 0,
        min_available=integer(task, "minAvailable", path),
        max_retry=integer(task, "maxRetry", path),
        policies=decode_policies(task, path),
        template=template,
        depends_on=_depends_on(task, path),
        partition=_partition(task, path),
        topology_policy=string(task, "topologyPolicy", path),
    )


def _volumes(spec: Mapping[str, Any]) -> tuple[Volume, ...]:
    out = []
    for i, raw in enumerate(items(spec, "volumes", "spec")):
        where = f"spec.volumes[{i}]"
        volume = element(raw, where)
        out.append(
            Volume(
                mount_path=string(volume, "mountPath", where),
                claim_name=string(volume, "volumeClaimName", where),
                has_claim=volume.get("volumeClaim") is not None,
            )
        )
    return tuple(out)


def _plugins(spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if spec.get("plugins") is None:
        return None
    plugins = mapping(spec, "plugins", "spec")
    for name, args in plugins.items():
        if args is not None and not isinstance(args, list):
            raise DecodeError(f"spec.plugins[{name}]", "a list", args)
    return plugins


def decode_job(obj: Mapping[str, Any] | None) -> Job:
    """Decode the admitted Job; raises `DecodeError` naming the first malformed field."""
    if obj is None:
        raise DecodeError("object", "a Job", None)
    meta = mapping(obj, "metadata", "")
    spec = mapping(obj, "spec", "")
    return Job(
        name=string(meta, "name", "metadata"),
        namespace=string(meta, "namespace", "metadata"),
        min_available=integer(spec, "minAvailable", "spec") or 0,
        max_retry=integer(spec, "maxRetry", "spec") or 0,
        ttl=integer(spec, "ttlSecondsAfterFinished", "spec"),
        queue=string(spec, "queue", "spec"),
        scheduler_name=string(spec, "schedulerName", "spec"),
        tasks=tuple(decode_task(t, f"spec.tasks[{i}]") for i, t in enumerate(items(spec, "tasks", "spec"))),
        policies=decode_policies(spec, "spec"),
        plugins=_plugins(spec),
        volumes=_volumes(spec),
        network_topology=mapping(spec, "networkTopology", "spec"),
    )
